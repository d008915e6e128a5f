//! One CUDA debugger attach at a time on this host.
//!
//! `where` attaches the CUDA debugger API to a process, suspends its GPUs, reads its warps and detaches. Two of
//! these at once on one host misbehave on driver 580: on two H200s, two attaches at once left one waiting 30 s for
//! its driver's `ATTACH_COMPLETE`, and with twelve `where`s started together against twelve busy PyTorch jobs (the
//! survival matrix), three of the jobs died by SIGSEGV right after theirs, where a lone `where` left the same job
//! running. So each `gpu-tools where` of a process holds this host-wide lock from before its attach to after its
//! detach, and the next one waits for it.
//!
//! The lock is a socket bound to a name in Linux's abstract namespace: the kernel lets one process bind the name,
//! and frees it when that process ends in any way (killed included), so a lock is never left behind. The namespace
//! is the network namespace's: processes in separate network namespaces (separate containers) do not see each
//! other's lock.

use std::io::ErrorKind;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::time::{Duration, Instant};

/// The name bound while a debugger attach runs.
const NAME: &[u8] = b"gpu-tools/cuda-debugger-attach";

/// How often a waiting `where` tries again.
const RETRY: Duration = Duration::from_millis(50);

/// Held while a debugger attach runs; dropping it lets the next one go.
#[derive(Debug)]
pub struct HostLock {
    _bound: UnixListener,
}

/// Takes the host's debugger-attach lock, waiting up to `wait` for another `gpu-tools where` to finish.
/// `waiting` is called once, when the lock is found taken.
pub fn acquire(wait: Duration, waiting: impl FnOnce()) -> Result<HostLock, String> {
    acquire_named(NAME, wait, waiting)
}

/// [`acquire`] of the lock bound to `name`.
fn acquire_named(name: &[u8], wait: Duration, waiting: impl FnOnce()) -> Result<HostLock, String> {
    let addr = SocketAddr::from_abstract_name(name)
        .map_err(|e| format!("the debugger-attach lock's name is refused: {e}"))?;
    let deadline = Instant::now() + wait;
    let mut waiting = Some(waiting);
    loop {
        match UnixListener::bind_addr(&addr) {
            Ok(bound) => return Ok(HostLock { _bound: bound }),
            Err(e) if e.kind() == ErrorKind::AddrInUse => {
                if let Some(say) = waiting.take() {
                    say();
                }
                if Instant::now() >= deadline {
                    return Err(format!(
                        "another gpu-tools where on this host held the CUDA debugger for {} s: two debugger attaches \
                         at once are not made (they have crashed jobs on driver 580); try again when it has finished",
                        wait.as_secs()
                    ));
                }
                std::thread::sleep(RETRY);
            }
            Err(e) => {
                return Err(format!(
                    "the host-wide lock that keeps debugger attaches one at a time could not be taken ({e}): not \
                     attaching"
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_waits_until_the_first_lets_go() {
        // A name of this test's own: the host's lock may be held by a `where` of another test meanwhile (a CI run
        // once failed here for that).
        let name = format!("gpu-tools-test/debugger-lock/{}", std::process::id());
        let name = name.as_bytes();
        let first = acquire_named(name, Duration::ZERO, || {}).expect("the lock is free");
        let mut said = false;
        let second = acquire_named(name, Duration::from_millis(120), || said = true);
        assert!(said, "the wait is said");
        let e = second.expect_err("held by the first");
        assert!(e.contains("another gpu-tools where"), "{e}");
        drop(first);
        acquire_named(name, Duration::ZERO, || panic!("free again")).expect("free once dropped");
    }
}
