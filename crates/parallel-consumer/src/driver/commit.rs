//! One OffsetCommit request for all partitions, with each partition's
//! result.
//!
//! librdkafka's `rd_kafka_commit` (rdkafka's `Consumer::commit`) reports a
//! request in which only some partitions failed as a success: its result is
//! an error only when every partition failed. A checkpoint must never be
//! recorded for a partition whose commit was refused, so the per-partition
//! errors are read from the result list that `rd_kafka_commit_queue` hands
//! to its callback (rdkafka does not expose that call). Without a queue
//! argument it waits for the broker's answer and calls the callback on the
//! calling thread before it returns.

use std::ffi::{CStr, c_void};
use std::ptr;

use rdkafka::bindings as rdsys;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::types::RDKafkaRespErr;

use crate::engine::CommitRequest;

/// The per-partition errors of one commit answer: (topic, partition, code).
type Answer = Vec<(String, i32, RDKafkaRespErr)>;

/// Copies the result list of a commit into the `Answer` behind `opaque`.
///
/// Called by librdkafka on the thread that called `rd_kafka_commit_queue`,
/// before that call returns. It must not unwind into C: it only reads the
/// list and pushes into a `Vec`.
#[allow(unsafe_code)]
unsafe extern "C" fn on_commit(
    _rk: *mut rdsys::rd_kafka_t,
    _err: RDKafkaRespErr,
    offsets: *mut rdsys::rd_kafka_topic_partition_list_t,
    opaque: *mut c_void,
) {
    if offsets.is_null() || opaque.is_null() {
        return;
    }
    // SAFETY: `opaque` is the `&mut Answer` that `commit_all` passed to
    // `rd_kafka_commit_queue`, alive (and not otherwise borrowed) for the
    // whole call, during which this callback runs.
    let answer = unsafe { &mut *opaque.cast::<Answer>() };
    // SAFETY: librdkafka passes a valid list that stays alive during the
    // callback; `elems` holds `cnt` initialised elements.
    let list = unsafe { &*offsets };
    let count = usize::try_from(list.cnt).unwrap_or(0);
    for i in 0..count {
        // SAFETY: `i < cnt`, see above.
        let e = unsafe { &*list.elems.add(i) };
        if e.topic.is_null() {
            continue;
        }
        // SAFETY: a list element's topic is a NUL-terminated string owned
        // by the list.
        let topic = unsafe { CStr::from_ptr(e.topic) }
            .to_string_lossy()
            .into_owned();
        answer.push((topic, e.partition, e.err));
    }
}

/// The explicit offsets, with their metadata, of `requests`.
fn offsets_of(requests: &[CommitRequest]) -> Result<TopicPartitionList, KafkaError> {
    let mut tpl = TopicPartitionList::with_capacity(requests.len());
    for r in requests {
        tpl.add_partition_offset(&r.tp.topic, r.tp.partition, Offset::Offset(r.offset))?;
        if let Some(mut e) = tpl.find_partition(&r.tp.topic, r.tp.partition) {
            e.set_metadata(&r.metadata);
        }
    }
    Ok(tpl)
}

/// Sends every request in one OffsetCommit without waiting: each
/// partition's result comes through the consumer context's commit callback,
/// served by `poll` on the owner thread. `Err` when it could not be sent.
///
/// The answer is addressed to the consumer queue (`rd_kafka_commit_queue`):
/// librdkafka hands the answer of an asynchronous `rd_kafka_commit` only
/// to an `offset_commit_cb`, which rdkafka does not set (it reads events),
/// so that answer would be lost.
#[allow(unsafe_code)]
pub(crate) fn send_async<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    requests: &[CommitRequest],
) -> Result<(), KafkaError> {
    let tpl = offsets_of(requests)?;
    let rk = consumer.client().native_ptr();
    // SAFETY: `rk` is the live consumer's handle; the call returns a new
    // reference to its consumer queue (null without a group).
    let queue = unsafe { rdsys::rd_kafka_queue_get_consumer(rk) };
    if queue.is_null() {
        return Err(KafkaError::ConsumerCommit(RDKafkaErrorCode::UnknownGroup));
    }
    // SAFETY: the handle, the list and the queue are valid for the call;
    // librdkafka copies the list, keeps its own reference to the queue for
    // the answer, and with no callback the answer becomes an event on that
    // queue.
    let err = unsafe {
        let err = rdsys::rd_kafka_commit_queue(rk, tpl.ptr(), queue, None, ptr::null_mut());
        rdsys::rd_kafka_queue_destroy(queue);
        err
    };
    if err == RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR {
        Ok(())
    } else {
        Err(KafkaError::ConsumerCommit(RDKafkaErrorCode::from(err)))
    }
}

/// Commits every request in one OffsetCommit (explicit offsets with their
/// metadata), waits for the answer and returns one result per request, in
/// order. A request missing from the answer gets the request's error.
#[allow(unsafe_code)]
pub(crate) fn commit_all<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    requests: &[CommitRequest],
) -> Vec<Result<(), KafkaError>> {
    if requests.is_empty() {
        return Vec::new();
    }
    let tpl = match offsets_of(requests) {
        Ok(tpl) => tpl,
        Err(e) => return requests.iter().map(|_| Err(e.clone())).collect(),
    };
    let mut answer: Answer = Vec::with_capacity(requests.len());
    // SAFETY: the client pointer and the list are valid for the call; with
    // a null queue librdkafka waits for the answer and runs `on_commit` on
    // this thread before returning, so `answer` outlives every use of the
    // opaque pointer; the list is copied, not kept.
    let err = unsafe {
        rdsys::rd_kafka_commit_queue(
            consumer.client().native_ptr(),
            tpl.ptr(),
            ptr::null_mut(),
            Some(on_commit),
            ptr::from_mut(&mut answer).cast::<c_void>(),
        )
    };
    let request_error = (err != RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR)
        .then(|| KafkaError::ConsumerCommit(RDKafkaErrorCode::from(err)));
    requests
        .iter()
        .map(|r| {
            let code = answer
                .iter()
                .find(|(t, p, _)| *t == *r.tp.topic && *p == r.tp.partition)
                .map(|(_, _, code)| *code);
            match (code, &request_error) {
                (Some(RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR), _) => Ok(()),
                (Some(code), _) => Err(KafkaError::ConsumerCommit(RDKafkaErrorCode::from(code))),
                (None, Some(e)) => Err(e.clone()),
                (None, None) => Err(KafkaError::ConsumerCommit(RDKafkaErrorCode::Fail)),
            }
        })
        .collect()
}
