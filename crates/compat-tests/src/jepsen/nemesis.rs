//! The nemesis: one fault at a time on a seeded schedule, each healed
//! before the next. The first round runs every enabled kind once in the
//! order of [`Fault::ALL`] (so a short run sees each); after that the kind,
//! the victim and every duration come from the seeded generator.

use std::fmt;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use super::nodes::Cluster;
use super::workload::pause;
use super::{JepsenError, Rng};

/// The kinds of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fault {
    /// kill -9 the leader of a random partition, restart it after a pause.
    KillLeader,
    /// SIGSTOP a random follower of a random partition, SIGCONT it later.
    PauseFollower,
    /// Take the link of a random partition's leader down, up again later
    /// (network namespaces; needs root).
    Partition,
    /// SIGTERM a random node (controlled shutdown) and start it again.
    Restart,
}

impl Fault {
    /// Every kind, in the order of the first round (quick ones first, so a
    /// short run gets through it).
    pub const ALL: [Fault; 4] = [
        Fault::KillLeader,
        Fault::PauseFollower,
        Fault::Restart,
        Fault::Partition,
    ];

    /// The name used in `WEIR_JEPSEN_NEMESES` and reports.
    pub fn name(self) -> &'static str {
        match self {
            Fault::KillLeader => "kill",
            Fault::PauseFollower => "pause",
            Fault::Partition => "partition",
            Fault::Restart => "restart",
        }
    }

    pub fn from_name(name: &str) -> Option<Fault> {
        Fault::ALL.into_iter().find(|f| f.name() == name)
    }

    /// How long the fault lasts: a range the generator picks from.
    fn hold(self) -> (Duration, Duration) {
        let ms = Duration::from_millis;
        match self {
            // Sometimes shorter than the session timeout (the node is back
            // before it is fenced), sometimes longer (a new leader).
            Fault::KillLeader => (ms(500), ms(5000)),
            // Around replica.lag.time.max.ms: the ISR shrinks, or not.
            Fault::PauseFollower => (ms(500), ms(5000)),
            // Longer than the session timeout: the majority fences it.
            Fault::Partition => (ms(2000), ms(7000)),
            Fault::Restart => (ms(0), ms(0)),
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One thing the nemesis did, at a time since the nemesis started.
#[derive(Debug, Clone)]
pub struct Event {
    pub at: Duration,
    pub fault: Fault,
    /// True for the event that starts a fault, false for its healing.
    pub injected: bool,
    pub what: String,
}

/// The schedule's state: what is enabled, the generator, the log.
pub(crate) struct Nemesis {
    faults: Vec<Fault>,
    rng: Rng,
    started: Instant,
    round: usize,
    pub(crate) events: Vec<Event>,
    /// Nodes that exited without being told to: when (nemesis time), which,
    /// how. Each was started again at once, as a supervisor would.
    pub(crate) exits: Vec<(Duration, i32, String)>,
    /// When the first fault was injected.
    pub(crate) first_fault: Option<Instant>,
}

/// The quiet time between two faults.
const GAP: (Duration, Duration) = (Duration::from_millis(500), Duration::from_millis(2000));

impl Nemesis {
    pub(crate) fn new(faults: Vec<Fault>, seed: u64) -> Self {
        Nemesis {
            faults,
            rng: Rng::new(seed),
            started: Instant::now(),
            round: 0,
            events: Vec::new(),
            exits: Vec::new(),
            first_fault: None,
        }
    }

    /// When the nemesis started.
    pub(crate) fn started(&self) -> Instant {
        self.started
    }

    fn log(&mut self, fault: Fault, injected: bool, what: String) {
        let at = self.started.elapsed();
        eprintln!("jepsen nemesis {:>6.1}s {fault}: {what}", at.as_secs_f64());
        self.events.push(Event {
            at,
            fault,
            injected,
            what,
        });
    }

    /// Injects faults for `duration` (or until `stop` is set); `on_first` runs just before the first fault.
    /// Every fault is healed before this returns.
    pub(crate) fn run(
        &mut self,
        cluster: &mut Cluster<'_>,
        topic: &str,
        duration: Duration,
        stop: &AtomicBool,
        mut on_first: impl FnMut(),
    ) -> Result<(), JepsenError> {
        self.started = Instant::now();
        let end = self.started + duration;
        while !self.faults.is_empty() && Instant::now() < end {
            self.restart_exited(cluster)?;
            let fault = if self.round < self.faults.len() {
                self.faults[self.round]
            } else {
                self.faults[self.rng.below(self.faults.len() as u64) as usize]
            };
            self.round += 1;
            let (lo, hi) = fault.hold();
            let left = end.saturating_duration_since(Instant::now());
            let hold = self.rng.between(lo, hi).min(left);
            if self.first_fault.is_none() {
                on_first();
                self.first_fault = Some(Instant::now());
            }
            self.inject(cluster, topic, fault, hold, stop)?;
            let gap = self.rng.between(GAP.0, GAP.1);
            pause(gap.min(end.saturating_duration_since(Instant::now())), stop);
        }
        self.restart_exited(cluster)
    }

    /// Notes every node that exited on its own (a broker giving up, a
    /// crash) and starts it again.
    pub(crate) fn restart_exited(&mut self, cluster: &mut Cluster<'_>) -> Result<(), JepsenError> {
        for (id, status) in cluster.reap() {
            let at = self.started.elapsed();
            eprintln!(
                "jepsen nemesis {:>6.1}s NODE {id} EXITED ON ITS OWN ({status}): starting it again",
                at.as_secs_f64()
            );
            self.exits.push((at, id, status));
            cluster.start_node(id)?;
        }
        Ok(())
    }

    fn inject(
        &mut self,
        cluster: &mut Cluster<'_>,
        topic: &str,
        fault: Fault,
        hold: Duration,
        stop: &AtomicBool,
    ) -> Result<(), JepsenError> {
        match fault {
            Fault::KillLeader => {
                let (id, why) = self.leader(cluster, topic);
                cluster.node(id).kill9();
                self.log(
                    fault,
                    true,
                    format!("kill -9 node {id} ({why}) for {hold:.1?}"),
                );
                pause(hold, stop);
                cluster.start_node(id)?;
                self.log(fault, false, format!("node {id} started again"));
            }
            Fault::PauseFollower => {
                let (id, why) = self.follower(cluster, topic);
                cluster.node(id).signal(libc::SIGSTOP);
                self.log(
                    fault,
                    true,
                    format!("SIGSTOP node {id} ({why}) for {hold:.1?}"),
                );
                pause(hold, stop);
                cluster.node(id).signal(libc::SIGCONT);
                self.log(fault, false, format!("SIGCONT node {id}"));
            }
            Fault::Partition => {
                let (id, why) = self.leader(cluster, topic);
                cluster.isolate(id)?;
                self.log(
                    fault,
                    true,
                    format!("link of node {id} down ({why}) for {hold:.1?}"),
                );
                pause(hold, stop);
                cluster.reconnect(id)?;
                self.log(fault, false, format!("link of node {id} up"));
            }
            Fault::Restart => {
                let id = self.any_node(cluster);
                let exit = cluster.node(id).terminate();
                self.log(fault, true, format!("SIGTERM node {id}: {exit}"));
                cluster.start_node(id)?;
                self.log(fault, false, format!("node {id} started again"));
            }
        }
        Ok(())
    }

    fn any_node(&mut self, cluster: &Cluster<'_>) -> i32 {
        let ids = cluster.ids();
        ids[self.rng.below(ids.len() as u64) as usize]
    }

    /// The leader of a random partition of `topic`; a random node when the
    /// metadata names none.
    fn leader(&mut self, cluster: &Cluster<'_>, topic: &str) -> (i32, String) {
        let pick = self.rng.next_u64();
        let led: Vec<(i32, i32)> = cluster
            .metadata()
            .map(|m| {
                m.partitions(topic)
                    .iter()
                    .filter(|p| p.leader > 0)
                    .map(|p| (p.partition, p.leader))
                    .collect()
            })
            .unwrap_or_default();
        match led.get((pick % led.len().max(1) as u64) as usize) {
            Some(&(p, leader)) => (leader, format!("leader of partition {p}")),
            None => (
                self.any_node(cluster),
                "no leader known: random node".into(),
            ),
        }
    }

    /// A random in-sync follower of a random partition of `topic`; a
    /// random node when the metadata names none.
    fn follower(&mut self, cluster: &Cluster<'_>, topic: &str) -> (i32, String) {
        let pick = self.rng.next_u64();
        let followers: Vec<(i32, i32)> = cluster
            .metadata()
            .map(|m| {
                m.partitions(topic)
                    .iter()
                    .flat_map(|p| {
                        p.isr
                            .iter()
                            .filter(|&&r| r != p.leader)
                            .map(|&r| (p.partition, r))
                            .collect::<Vec<_>>()
                    })
                    .collect()
            })
            .unwrap_or_default();
        match followers.get((pick % followers.len().max(1) as u64) as usize) {
            Some(&(p, id)) => (id, format!("in-sync follower of partition {p}")),
            None => (
                self.any_node(cluster),
                "no follower known: random node".into(),
            ),
        }
    }

    /// How many faults of each kind were injected.
    pub(crate) fn counts(&self) -> Vec<(Fault, usize)> {
        Fault::ALL
            .into_iter()
            .map(|f| {
                let n = self
                    .events
                    .iter()
                    .filter(|e| e.fault == f && e.injected)
                    .count();
                (f, n)
            })
            .collect()
    }
}
