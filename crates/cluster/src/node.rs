//! [`ControllerNode`]: one node of the controller quorum — its metadata
//! raft, the image it applies and the controller beside it.

use tokio::net::TcpListener;
use weir_raft::network::MemRouter;
use weir_raft::{MetadataRaft, RaftOptions, RaftStartError};

use crate::controller::{QuorumController, QuorumControllerConfig};
use crate::image::{ImageReader, ImageStateMachine};

/// A running controller-quorum node. Invariant: `images` follows the state
/// machine `raft` applies to, and `controller` proposes through `raft`.
pub struct ControllerNode {
    pub raft: MetadataRaft<ImageStateMachine>,
    pub images: ImageReader,
    pub controller: QuorumController,
}

impl ControllerNode {
    /// Starts a node over TCP, serving raft RPCs on `listener`.
    pub async fn start_tcp(
        options: RaftOptions,
        config: QuorumControllerConfig,
        listener: TcpListener,
    ) -> Result<Self, RaftStartError> {
        let (sm, images) = ImageStateMachine::with_retained(config.retained_batches);
        let raft = MetadataRaft::start_tcp(options, sm, listener).await?;
        Ok(Self::assemble(raft, images, config))
    }

    /// Starts a node that talks to the other voters over TCP but serves no
    /// listener: the caller serves the CONTROLLER listener (see
    /// [`crate::listener::serve`], which hands raft connections to
    /// this node's raft).
    pub async fn start_tcp_client(
        options: RaftOptions,
        config: QuorumControllerConfig,
    ) -> Result<Self, RaftStartError> {
        let (sm, images) = ImageStateMachine::with_retained(config.retained_batches);
        let raft = MetadataRaft::start_tcp_client(options, sm).await?;
        Ok(Self::assemble(raft, images, config))
    }

    /// Starts a node on an in-memory router (tests).
    pub async fn start_mem(
        options: RaftOptions,
        config: QuorumControllerConfig,
        router: &MemRouter,
    ) -> Result<Self, RaftStartError> {
        let (sm, images) = ImageStateMachine::with_retained(config.retained_batches);
        let raft = MetadataRaft::start_mem(options, sm, router).await?;
        Ok(Self::assemble(raft, images, config))
    }

    fn assemble(
        raft: MetadataRaft<ImageStateMachine>,
        images: ImageReader,
        config: QuorumControllerConfig,
    ) -> Self {
        let controller =
            QuorumController::new(raft.node_id(), raft.raft().clone(), images.clone(), config);
        ControllerNode {
            raft,
            images,
            controller,
        }
    }

    pub fn node_id(&self) -> u64 {
        self.raft.node_id()
    }

    /// Stops raft; the controller answers errors from then on.
    pub async fn shutdown(self) -> Result<(), RaftStartError> {
        self.raft.shutdown().await
    }
}
