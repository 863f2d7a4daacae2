//! [`Netns`]: Linux network namespaces for network-partition tests.
//!
//! One namespace per node, `weir-<pid>-<seq>-<i>` (`i` from 1), each with
//! loopback up and one veth link, `eth0` with address `10.A.B.i/24`, whose
//! peer `v<i>` sits on a bridge in a hub namespace `weir-<pid>-<seq>-hub`
//! (which has `10.A.B.254/24`, so commands run there act as a client host on
//! the same network). [`Netns::partition`] takes node `i`'s link down at the
//! hub end (packets to and from the node vanish, like a pulled cable: no
//! reset, no error, only timeouts); [`Netns::heal`] brings it up again. The
//! node keeps its own address meanwhile, so commands run inside its
//! namespace still reach a server there.
//!
//! Nothing is created in the root namespace: every link lives in one of the
//! run's namespaces and goes with it, so the host's routes, addresses and
//! firewall are never involved and two runs (with their own prefixes) never
//! collide, even on the same subnet.
//!
//! Cleanup: dropping a [`Netns`] kills every process still inside its
//! namespaces and deletes them, on a panic too. A run that was killed
//! outright leaves its namespaces behind; [`Netns::create`] first sweeps
//! every `weir-<pid>-…` namespace whose `<pid>` is no longer a running
//! process.
//!
//! Needs root (or `CAP_SYS_ADMIN` and `CAP_NET_ADMIN`) and iproute2's `ip`;
//! [`Netns::supported`] says whether they are there.
//!
//! ```no_run
//! use std::process::Command;
//! use weir_compat_tests::netns::Netns;
//!
//! let net = Netns::create(3, [10, 77]).expect("namespaces");
//! let mut server = net.command(1, "some-server");
//! server.arg(format!("--listen={}:9092", net.addr(1)));
//! // ... spawn it, talk to it from net.hub_command("client") ...
//! net.partition(1).expect("link down");
//! net.heal(1).expect("link up");
//! drop(net); // kills what still runs inside, deletes the namespaces
//! ```

use std::ffi::OsStr;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// Every namespace this helper creates starts with this.
pub const PREFIX: &str = "weir-";

/// The host part of the hub namespace's address on the bridge.
const HUB_HOST: u8 = 254;

/// Errors of the namespace helper: which `ip` command failed and what it said.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error("cannot run `ip {args}`: {source}")]
    Spawn {
        args: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`ip {args}` failed ({status}): {stderr}")]
    Failed {
        args: String,
        status: std::process::ExitStatus,
        stderr: String,
    },
    #[error("{nodes} nodes do not fit a /24 beside the hub (1..=253)")]
    TooManyNodes { nodes: usize },
}

/// The namespaces of one test run.
///
/// Invariant: namespaces `node_ns(1..=nodes)` and `hub_ns()` exist, node
/// `i`'s `eth0` has `addr(i)`, and its peer `v<i>` is enslaved to the hub's
/// bridge (up unless [`partition`](Self::partition)ed). Dropping the value
/// removes all of them.
pub struct Netns {
    prefix: String,
    nodes: usize,
    subnet: [u8; 2],
}

impl Netns {
    /// True when namespaces can be made here: `ip` runs and a probe
    /// namespace can be added and deleted.
    pub fn supported() -> bool {
        let probe = format!("{PREFIX}{}-probe", std::process::id());
        let added = ip(["netns", "add", probe.as_str()]).is_ok();
        let _ = ip(["netns", "del", probe.as_str()]);
        added
    }

    /// Sweeps namespaces left by dead runs, then creates `nodes` node
    /// namespaces on `10.<subnet[0]>.<subnet[1]>.0/24` and the hub.
    pub fn create(nodes: usize, subnet: [u8; 2]) -> Result<Self, NetnsError> {
        if nodes == 0 || nodes >= usize::from(HUB_HOST) {
            return Err(NetnsError::TooManyNodes { nodes });
        }
        sweep_stale();
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let prefix = format!(
            "{PREFIX}{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        // From here on Drop deletes whatever was made, if a step fails.
        let net = Netns {
            prefix,
            nodes,
            subnet,
        };
        net.build()?;
        Ok(net)
    }

    fn build(&self) -> Result<(), NetnsError> {
        let hub = self.hub_ns();
        ip(["netns", "add", &hub])?;
        ip(["-n", &hub, "link", "set", "lo", "up"])?;
        ip(["-n", &hub, "link", "add", "br0", "type", "bridge"])?;
        let hub_cidr = format!("{}/24", self.host(HUB_HOST));
        ip(["-n", &hub, "addr", "add", &hub_cidr, "dev", "br0"])?;
        ip(["-n", &hub, "link", "set", "br0", "up"])?;
        for i in 1..=self.nodes {
            let ns = self.node_ns(i);
            let peer = peer_link(i);
            ip(["netns", "add", &ns])?;
            ip(["-n", &ns, "link", "set", "lo", "up"])?;
            // Both ends are born in namespaces of this run: eth0 in the
            // node's, the peer moved straight into the hub's.
            ip([
                "-n", &ns, "link", "add", "eth0", "type", "veth", "peer", "name", &peer, "netns",
                &hub,
            ])?;
            ip(["-n", &hub, "link", "set", &peer, "master", "br0"])?;
            ip(["-n", &hub, "link", "set", &peer, "up"])?;
            let cidr = format!("{}/24", self.addr(i));
            ip(["-n", &ns, "addr", "add", &cidr, "dev", "eth0"])?;
            ip(["-n", &ns, "link", "set", "eth0", "up"])?;
        }
        Ok(())
    }

    /// Number of node namespaces.
    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// Name of node `i`'s namespace (`i` from 1).
    pub fn node_ns(&self, i: usize) -> String {
        format!("{}-{i}", self.prefix)
    }

    /// Name of the hub namespace (the bridge, and a client host on it).
    pub fn hub_ns(&self) -> String {
        format!("{}-hub", self.prefix)
    }

    /// Node `i`'s address (`i` from 1).
    pub fn addr(&self, i: usize) -> Ipv4Addr {
        let host = u8::try_from(i)
            .ok()
            .filter(|h| (1..HUB_HOST).contains(h))
            .unwrap_or_else(|| panic!("node {i} is not one of 1..=253"));
        self.host(host)
    }

    /// The hub's address on the bridge.
    pub fn hub_addr(&self) -> Ipv4Addr {
        self.host(HUB_HOST)
    }

    fn host(&self, host: u8) -> Ipv4Addr {
        Ipv4Addr::new(10, self.subnet[0], self.subnet[1], host)
    }

    /// `ip netns exec <node i's namespace> program`: add arguments, then spawn.
    pub fn command(&self, i: usize, program: impl AsRef<OsStr>) -> Command {
        exec_in(&self.node_ns(i), program.as_ref())
    }

    /// `ip netns exec <hub namespace> program`: a client on the bridge.
    pub fn hub_command(&self, program: impl AsRef<OsStr>) -> Command {
        exec_in(&self.hub_ns(), program.as_ref())
    }

    /// Cuts node `i` off: its link's hub end goes down.
    pub fn partition(&self, i: usize) -> Result<(), NetnsError> {
        ip(["-n", &self.hub_ns(), "link", "set", &peer_link(i), "down"])
    }

    /// Reconnects node `i`: its link's hub end comes up.
    pub fn heal(&self, i: usize) -> Result<(), NetnsError> {
        ip(["-n", &self.hub_ns(), "link", "set", &peer_link(i), "up"])
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Processes first: a namespace outlives `ip netns del` while
        // anything still runs in it.
        let names: Vec<String> = (1..=self.nodes)
            .map(|i| self.node_ns(i))
            .chain([self.hub_ns()])
            .collect();
        for ns in &names {
            remove_namespace(ns);
        }
    }
}

/// Node `i`'s link end in the hub namespace.
fn peer_link(i: usize) -> String {
    format!("v{i}")
}

fn exec_in(ns: &str, program: &OsStr) -> Command {
    let mut command = Command::new("ip");
    command.args(["netns", "exec", ns]).arg(program);
    command
}

/// Kills every process in namespace `ns` (SIGKILL), then deletes it.
/// Errors are ignored: this is cleanup, and a namespace that is already gone
/// is the goal.
fn remove_namespace(ns: &str) {
    if let Ok(out) = ip_output(["netns", "pids", ns]) {
        let pids: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter(|p| p.parse::<u32>().is_ok())
            .map(str::to_string)
            .collect();
        if !pids.is_empty() {
            let _ = Command::new("kill")
                .arg("-KILL")
                .args(&pids)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
    let _ = ip(["netns", "del", ns]);
}

/// Removes the namespaces of runs that died without dropping their
/// [`Netns`]: names `weir-<pid>-…` whose `<pid>` is not a running process.
/// This run's own namespaces, and those of live runs, are left alone.
fn sweep_stale() {
    let Ok(out) = ip_output(["netns", "list"]) else {
        return;
    };
    let me = std::process::id();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        // `name` or `name (id: N)`
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        let Some(owner) = owner_pid(name) else {
            continue;
        };
        if owner != me && !Path::new(&format!("/proc/{owner}")).exists() {
            remove_namespace(name);
        }
    }
}

/// The pid in a name `weir-<pid>-…`, if the name has that shape.
fn owner_pid(name: &str) -> Option<u32> {
    let (pid, rest) = name.strip_prefix(PREFIX)?.split_once('-')?;
    if rest.is_empty() {
        return None;
    }
    pid.parse().ok()
}

fn ip<const N: usize>(args: [&str; N]) -> Result<(), NetnsError> {
    ip_output(args).map(drop)
}

fn ip_output<const N: usize>(args: [&str; N]) -> Result<Output, NetnsError> {
    let joined = || args.join(" ");
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| NetnsError::Spawn {
            args: joined(),
            source,
        })?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(NetnsError::Failed {
            args: joined(),
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::owner_pid;

    #[test]
    fn only_names_of_the_helper_shape_have_an_owner() {
        assert_eq!(owner_pid("weir-1234-0-1"), Some(1234));
        assert_eq!(owner_pid("weir-1234-0-hub"), Some(1234));
        assert_eq!(owner_pid("weir-1234-probe"), Some(1234));
        assert_eq!(owner_pid("weir-1234-"), None);
        assert_eq!(owner_pid("weir-1234"), None);
        assert_eq!(owner_pid("weir-abc-0-1"), None);
        assert_eq!(owner_pid("other-1234-0-1"), None);
    }
}
