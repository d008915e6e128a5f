//! The process numbers of the groups: one of its own for each group of the export (what Chrome's JSON and
//! Perfetto's process descriptors tell processes apart by), and group names that tell apart processes sharing a
//! pid.
//!
//! A traced process is its stream (file and stream number), not its pid: processes in two PID namespaces, on two
//! hosts, or a pid used again over a long trace share one. A process group keeps its process's pid as its number
//! where no group before it took that number; every other group (a GPU's, a device's counters', a process whose pid
//! was taken or lies at or above [`OWN`]) gets a number of the export's own, counted up from [`OWN`], which no pid
//! kept takes.

use std::collections::HashSet;
use std::io;

/// The first of the export's own numbers: above every Linux pid (`pid_max` is at most 2^22).
pub(super) const OWN: u32 = 1 << 30;
/// The end of the export's own numbers: Perfetto's `ProcessDescriptor.pid` is an `int32`.
const END: u32 = 1 << 31;

/// The numbers given so far.
#[derive(Debug)]
pub(super) struct ProcessNumbers {
    /// The pids kept as numbers.
    kept: HashSet<u32>,
    /// The next number of the export's own.
    next: u32,
    /// Group names given so far.
    names: HashSet<String>,
}

impl Default for ProcessNumbers {
    fn default() -> Self {
        ProcessNumbers {
            kept: HashSet::new(),
            next: OWN,
            names: HashSet::new(),
        }
    }
}

impl ProcessNumbers {
    /// A number for a new group: `pid` where given, below [`OWN`] and not yet taken, else one of the export's own.
    /// An error past 2^30 groups.
    pub(super) fn number(&mut self, pid: Option<u32>) -> io::Result<u32> {
        if let Some(pid) = pid.filter(|&p| p < OWN) {
            if self.kept.insert(pid) {
                return Ok(pid);
            }
        }
        if self.next >= END {
            return Err(io::Error::other(
                "more than 2^30 process groups: the export has no process number left",
            ));
        }
        let n = self.next;
        self.next += 1;
        Ok(n)
    }

    /// `name` for a new group where no group before it has that name, else `name` with the stream it stands for
    /// (`process 1 python train.py (file 0 stream 1)`): two processes that share a pid, host and command are told
    /// apart.
    pub(super) fn name(&mut self, name: String, key: (u32, u32)) -> String {
        let name = if self.names.contains(&name) {
            format!("{name} (file {} stream {})", key.0, key.1)
        } else {
            name
        };
        self.names.insert(name.clone());
        name
    }
}

/// A group's place among the groups not of ranks, by file, then pid, then device (a GPU's): in `0..2^31`, as the
/// formats' 32-bit places take it; files past 255 and pids past 2^22 (and 2^16 for a GPU's) share places.
pub(super) fn place(file: u32, pid: u32, device: Option<u32>) -> i64 {
    let file = i64::from(file.min(255)) << 22;
    match device {
        None => file | i64::from(pid.min((1 << 22) - 1)),
        Some(d) => i64::from(OWN) | file | (i64::from(pid & 0xffff) << 6) | i64::from(d & 0x3f),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pid_is_kept_once_and_others_get_numbers_of_their_own() {
        let mut n = ProcessNumbers::default();
        assert_eq!(n.number(Some(100)).unwrap(), 100);
        assert_eq!(n.number(Some(100)).unwrap(), OWN);
        assert_eq!(n.number(None).unwrap(), OWN + 1);
        // A pid among the export's own numbers is not kept: it could be one of them.
        assert_eq!(n.number(Some(OWN + 2)).unwrap(), OWN + 2);
        assert_eq!(n.number(Some(OWN + 3)).unwrap(), OWN + 3);
        assert_eq!(n.number(Some(4_194_404)).unwrap(), 4_194_404);
        n.next = END;
        assert!(n.number(None).is_err());
        assert_eq!(n.number(Some(7)).unwrap(), 7);
    }

    #[test]
    fn a_name_given_before_is_told_apart_by_its_stream() {
        let mut n = ProcessNumbers::default();
        assert_eq!(n.name("process 1 x".into(), (0, 0)), "process 1 x");
        assert_eq!(
            n.name("process 1 x".into(), (0, 1)),
            "process 1 x (file 0 stream 1)"
        );
        assert_eq!(n.name("process 2 x".into(), (1, 0)), "process 2 x");
    }

    #[test]
    fn places_stay_32_bit_and_put_gpus_after_processes() {
        assert_eq!(place(0, 100, None), 100);
        assert_eq!(place(1, 100, None), (1 << 22) | 100);
        assert!(place(u32::MAX, u32::MAX, None) < i64::from(OWN));
        assert!(place(0, 0, Some(0)) >= i64::from(OWN));
        assert!(place(u32::MAX, u32::MAX, Some(u32::MAX)) < i64::from(END));
    }
}
