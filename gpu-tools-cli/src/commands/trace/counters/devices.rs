//! Which GPUs `trace --counters` samples, and how each is numbered in the trace.
//!
//! A counter sample names its device as the traced processes' kernel records do: by the CUDA device ordinal in
//! those processes, which `CUDA_VISIBLE_DEVICES` (and `CUDA_DEVICE_ORDER`) decide. The sampler runs in this
//! process, whose ordinals may differ. So each traced process's view is read (a launched program's is this
//! process's own, which it inherits; an attached process's comes from `/proc/PID/environ`) and mapped onto this
//! process's devices: an index in `CUDA_VISIBLE_DEVICES` is this process's ordinal when this process sets none; a
//! `GPU-…` UUID (or a unique prefix of one) is matched against this process's devices' UUIDs. As CUDA does, the
//! list ends at the first entry that names no device.
//!
//! Every device a process can use is sampled, unless NVML lists the devices the attached processes hold contexts
//! on; then only those. The processes must agree: a GPU that two of them number differently, or an ordinal that
//! names two GPUs (ranks that each see one GPU as device 0), cannot be told apart in the samples, and is refused.

use std::collections::{BTreeMap, HashSet};

/// How a process sees the GPUs: its `CUDA_VISIBLE_DEVICES` and `CUDA_DEVICE_ORDER`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Visibility {
    /// `CUDA_VISIBLE_DEVICES`, where set.
    pub visible: Option<String>,
    /// `CUDA_DEVICE_ORDER`, where set (`FASTEST_FIRST` when not).
    pub order: Option<String>,
}

impl Visibility {
    /// This process's.
    pub fn current() -> Self {
        Visibility {
            visible: std::env::var("CUDA_VISIBLE_DEVICES").ok(),
            order: std::env::var("CUDA_DEVICE_ORDER").ok(),
        }
    }

    /// Process `pid`'s, from the environment it started with.
    pub fn of_process(pid: u32) -> Result<Self, String> {
        std::fs::read(format!("/proc/{pid}/environ"))
            .map(|bytes| Visibility::from_environ(&bytes))
            .map_err(|e| format!("cannot read the environment of process {pid}: {e}"))
    }

    /// From the bytes of `/proc/PID/environ` (`NAME=value` entries, each ended by a NUL).
    pub fn from_environ(bytes: &[u8]) -> Self {
        let mut v = Visibility::default();
        for entry in bytes.split(|&b| b == 0) {
            let text = String::from_utf8_lossy(entry);
            if let Some(value) = text.strip_prefix("CUDA_VISIBLE_DEVICES=") {
                v.visible = Some(value.to_string());
            } else if let Some(value) = text.strip_prefix("CUDA_DEVICE_ORDER=") {
                v.order = Some(value.to_string());
            }
        }
        v
    }

    fn order(&self) -> &str {
        self.order
            .as_deref()
            .map(str::trim)
            .filter(|o| !o.is_empty())
            .unwrap_or("FASTEST_FIRST")
    }
}

/// This process's ordinal of each of a process's CUDA ordinals (index: the process's ordinal), from the process's
/// view, this process's, and the UUIDs of this process's devices (`GPU-…`, by ordinal; `None` where unknown).
pub fn map_devices(
    process: &Visibility,
    tracer: &Visibility,
    uuids: &[Option<String>],
) -> Result<Vec<usize>, String> {
    let same_order = process.order() == tracer.order();
    if process.visible == tracer.visible && same_order {
        return Ok((0..uuids.len()).collect());
    }
    let Some(list) = &process.visible else {
        return Err(format!(
            "it sees every GPU (no CUDA_VISIBLE_DEVICES{}), and gpu-tools does not (CUDA_VISIBLE_DEVICES={}{}): \
             run gpu-tools with the process's CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER",
            if same_order {
                ""
            } else {
                ", another CUDA_DEVICE_ORDER"
            },
            tracer.visible.as_deref().unwrap_or("unset"),
            if same_order {
                ""
            } else {
                ", another CUDA_DEVICE_ORDER"
            }
        ));
    };
    let mut out: Vec<usize> = Vec::new();
    for entry in list.split(',').map(str::trim) {
        let found = if entry.bytes().all(|b| b.is_ascii_digit()) && !entry.is_empty() {
            if tracer.visible.is_some() || !same_order {
                return Err(format!(
                    "its CUDA_VISIBLE_DEVICES={list} names GPUs by index, which gpu-tools cannot match while its own \
                     view differs (CUDA_VISIBLE_DEVICES={}, CUDA_DEVICE_ORDER={} here, {} there): run gpu-tools \
                     with the process's CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER, or name GPUs by UUID",
                    tracer.visible.as_deref().unwrap_or("unset"),
                    tracer.order(),
                    process.order()
                ));
            }
            entry.parse::<usize>().ok().filter(|&i| i < uuids.len())
        } else if entry.len() >= 4 && entry[..4].eq_ignore_ascii_case("GPU-") {
            let want = entry.to_ascii_lowercase();
            let matches: Vec<usize> = uuids
                .iter()
                .enumerate()
                .filter(|(_, u)| {
                    u.as_deref()
                        .is_some_and(|u| u.to_ascii_lowercase().starts_with(&want))
                })
                .map(|(i, _)| i)
                .collect();
            match matches.as_slice() {
                [one] => Some(*one),
                [] if tracer.visible.is_some() => {
                    return Err(format!(
                        "it uses {entry}, which gpu-tools does not see (CUDA_VISIBLE_DEVICES={} here)",
                        tracer.visible.as_deref().unwrap_or("")
                    ));
                }
                [] if uuids.iter().any(Option::is_none) => {
                    return Err(format!(
                        "it names {entry} by UUID, and the driver did not give gpu-tools the UUIDs of its GPUs"
                    ));
                }
                _ => None,
            }
        } else if entry.len() >= 4 && entry[..4].eq_ignore_ascii_case("MIG-") {
            return Err(format!(
                "it runs on the MIG instance {entry}, and PM sampling samples whole GPUs, not MIG instances"
            ));
        } else {
            None
        };
        // As CUDA: the list ends at the first entry that names no device (or one named before).
        match found {
            Some(t) if !out.contains(&t) => out.push(t),
            _ => break,
        }
    }
    Ok(out)
}

/// A traced process's devices: its pid and [`map_devices`]'s answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessDevices {
    pub pid: u32,
    /// This process's ordinal of each of its ordinals.
    pub ordinals: Vec<usize>,
}

/// The devices to sample, as (this process's ordinal, the traced processes' ordinal), in this process's order:
/// each device a process can use, or, with `used` (this process's ordinals of the GPUs the processes hold
/// contexts on), each of those it can use. Refused where two processes number a GPU differently, or one ordinal
/// names two GPUs.
pub fn choose(
    processes: &[ProcessDevices],
    used: Option<&HashSet<usize>>,
) -> Result<Vec<(usize, u32)>, String> {
    // This process's ordinal -> (the traced ordinal, the pid that numbered it so).
    let mut by_tracer: BTreeMap<usize, (u32, u32)> = BTreeMap::new();
    let mut by_traced: BTreeMap<u32, (usize, u32)> = BTreeMap::new();
    for p in processes {
        for (k, &t) in p.ordinals.iter().enumerate() {
            if used.is_some_and(|u| !u.contains(&t)) {
                continue;
            }
            let k = u32::try_from(k).map_err(|_| "too many devices".to_string())?;
            if let Some(&(other, pid)) = by_tracer.get(&t) {
                if other != k {
                    return Err(format!(
                        "processes {pid} and {} number one GPU differently (device {other} and device {k}: their \
                         CUDA_VISIBLE_DEVICES differ), so its samples could not name the device of their kernels",
                        p.pid
                    ));
                }
            }
            if let Some(&(other, pid)) = by_traced.get(&k) {
                if other != t {
                    return Err(format!(
                        "processes {pid} and {} each call a different GPU device {k} (their CUDA_VISIBLE_DEVICES \
                         differ), so samples of device {k} could not say whose kernels they cover",
                        p.pid
                    ));
                }
            }
            by_tracer.insert(t, (k, p.pid));
            by_traced.insert(k, (t, p.pid));
        }
    }
    Ok(by_tracer.into_iter().map(|(t, (k, _))| (t, k)).collect())
}

/// The UUIDs (`GPU-…`) of the GPUs on which NVML lists one of `pids` as a compute process; `None` where NVML is
/// not there or lists none of them (pids of another namespace, or processes that hold no context yet).
pub fn used_by(pids: &[u32]) -> Option<HashSet<String>> {
    let nvml = crate::gpu_memory::GpuMemory::open().ok()?;
    let used = nvml.devices_of(pids).ok()?;
    (!used.is_empty()).then_some(used)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vis(visible: Option<&str>) -> Visibility {
        Visibility {
            visible: visible.map(String::from),
            order: None,
        }
    }

    fn uuids(n: usize) -> Vec<Option<String>> {
        (0..n)
            .map(|i| {
                Some(format!(
                    "GPU-{i}{i}{i}{i}aaaa-0000-0000-0000-00000000000{i}"
                ))
            })
            .collect()
    }

    #[test]
    fn the_environment_gives_the_view() {
        let v = Visibility::from_environ(
            b"A=1\0CUDA_VISIBLE_DEVICES=1,0\0CUDA_DEVICE_ORDER=PCI_BUS_ID\0",
        );
        assert_eq!(v.visible.as_deref(), Some("1,0"));
        assert_eq!(v.order(), "PCI_BUS_ID");
        assert_eq!(
            Visibility::from_environ(b"PATH=/bin\0"),
            Visibility::default()
        );
        assert_eq!(Visibility::default().order(), "FASTEST_FIRST");
        let me = Visibility::of_process(std::process::id()).unwrap();
        assert_eq!(me.visible, std::env::var("CUDA_VISIBLE_DEVICES").ok());
        assert!(Visibility::of_process(u32::MAX).is_err());
    }

    #[test]
    fn a_process_that_sees_what_the_tracer_sees_numbers_alike() {
        let u = uuids(3);
        assert_eq!(map_devices(&vis(None), &vis(None), &u), Ok(vec![0, 1, 2]));
        assert_eq!(
            map_devices(&vis(Some("2,0")), &vis(Some("2,0")), &u),
            Ok(vec![0, 1, 2]),
            "the same list: this process's ordinals are the process's"
        );
    }

    #[test]
    fn indices_and_uuids_are_mapped_and_the_list_ends_at_a_bad_entry() {
        let u = uuids(4);
        assert_eq!(
            map_devices(&vis(Some("2,0")), &vis(None), &u),
            Ok(vec![2, 0])
        );
        assert_eq!(
            map_devices(&vis(Some(" 3 , GPU-1111")), &vis(None), &u),
            Ok(vec![3, 1]),
            "a unique UUID prefix, any case"
        );
        assert_eq!(
            map_devices(
                &vis(Some("gpu-2222AAAA-0000-0000-0000-000000000002")),
                &vis(None),
                &u
            ),
            Ok(vec![2])
        );
        assert_eq!(
            map_devices(&vis(Some("1,7,0")), &vis(None), &u),
            Ok(vec![1])
        );
        assert_eq!(
            map_devices(&vis(Some("1,1,0")), &vis(None), &u),
            Ok(vec![1])
        );
        assert_eq!(map_devices(&vis(Some("")), &vis(None), &u), Ok(vec![]));
        assert_eq!(map_devices(&vis(Some("-1")), &vis(None), &u), Ok(vec![]));
        assert_eq!(
            map_devices(&vis(Some("GPU-,0")), &vis(None), &u),
            Ok(vec![]),
            "ambiguous"
        );
        assert_eq!(map_devices(&vis(Some("GPU-9")), &vis(None), &u), Ok(vec![]));
    }

    #[test]
    fn views_that_cannot_be_matched_are_refused() {
        let u = uuids(2);
        let all = map_devices(&vis(None), &vis(Some("1")), &u).unwrap_err();
        assert!(
            all.contains("sees every GPU") && all.contains("CUDA_VISIBLE_DEVICES=1"),
            "{all}"
        );
        let index = map_devices(&vis(Some("0")), &vis(Some("1")), &u).unwrap_err();
        assert!(index.contains("by index"), "{index}");
        // By UUID it works while this process has a view of its own.
        assert_eq!(
            map_devices(&vis(Some("GPU-1111")), &vis(Some("1,0")), &u),
            Ok(vec![1])
        );
        let unseen = map_devices(&vis(Some("GPU-7777")), &vis(Some("1,0")), &u).unwrap_err();
        assert!(unseen.contains("does not see"), "{unseen}");
        let mig = map_devices(&vis(Some("MIG-abc")), &vis(None), &u).unwrap_err();
        assert!(mig.contains("MIG"), "{mig}");
        let order = Visibility {
            visible: Some("0".into()),
            order: Some("PCI_BUS_ID".into()),
        };
        assert!(
            map_devices(&order, &vis(None), &u)
                .unwrap_err()
                .contains("PCI_BUS_ID")
        );
        let no_uuids = vec![None, None];
        assert!(
            map_devices(&vis(Some("GPU-1111")), &vis(None), &no_uuids)
                .unwrap_err()
                .contains("UUIDs")
        );
    }

    fn p(pid: u32, ordinals: &[usize]) -> ProcessDevices {
        ProcessDevices {
            pid,
            ordinals: ordinals.to_vec(),
        }
    }

    #[test]
    fn devices_are_chosen_and_renumbered_as_the_processes_number_them() {
        // One process that sees GPUs 2 and 0 (of this process) as its 0 and 1.
        assert_eq!(choose(&[p(10, &[2, 0])], None), Ok(vec![(0, 1), (2, 0)]));
        // Two that agree; NVML says only GPU 2 is used.
        let used: HashSet<usize> = [2].into();
        assert_eq!(
            choose(&[p(10, &[2, 0]), p(11, &[2, 0])], Some(&used)),
            Ok(vec![(2, 0)])
        );
        // Ranks that each see one GPU as device 0: device 0 would be two GPUs.
        let ranks = choose(&[p(10, &[0]), p(11, &[1])], None).unwrap_err();
        assert!(
            ranks.contains("processes 10 and 11") && ranks.contains("device 0"),
            "{ranks}"
        );
        // One GPU numbered two ways.
        let twice = choose(&[p(10, &[0, 1]), p(11, &[1, 0])], None).unwrap_err();
        assert!(twice.contains("differently"), "{twice}");
        // NVML's narrowing to GPU 0 still leaves it numbered two ways.
        let used: HashSet<usize> = [0].into();
        assert!(choose(&[p(10, &[0, 1]), p(11, &[1, 0])], Some(&used)).is_err());
        assert_eq!(
            choose(&[p(10, &[0, 1]), p(11, &[0])], None),
            Ok(vec![(0, 0), (1, 1)])
        );
        assert_eq!(choose(&[], None), Ok(vec![]));
    }
}
