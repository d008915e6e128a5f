//! Property tests of the core-dump reader on mutated dumps: truncations, and changed bytes in the ELF header, in
//! section headers (offsets, sizes, links, indices, entry sizes, types) and inside the tables. Whatever the bytes,
//! reading returns a dump or a `CoreDumpError`, never panics, and every accessor of a dump that was read stays in
//! bounds.
//!
//! The dumps mutated are the committed fixtures (`tests/fixtures/coredump`, see `coredump_fixtures.rs`), any dump
//! named by `GPU_TOOLS_COREDUMP_FUZZ_SEED`, and the writer's sample in both layouts. `GPU_TOOLS_FUZZ_CASES` sets
//! the number of cases per property (default 1000).
#![cfg(feature = "coredump")]

use gpu_tools_testing::coredump_writer as writer;

use std::path::Path;
use std::sync::OnceLock;

use gpu_tools::coredump::CoreDump;
use proptest::prelude::*;
use proptest::sample::Index;

fn seeds() -> &'static [Vec<u8>] {
    static SEEDS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    SEEDS.get_or_init(|| {
        let mut out = vec![
            writer::sample(writer::Layout::Current),
            writer::sample(writer::Layout::Baseline),
        ];
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/coredump");
        if let Ok(list) = std::fs::read_to_string(dir.join("MANIFEST")) {
            for f in list
                .lines()
                .map(str::trim)
                .filter(|l| l.ends_with(".cudacore"))
            {
                out.push(std::fs::read(dir.join(f)).expect("listed fixture"));
            }
        }
        if let Some(p) = std::env::var_os("GPU_TOOLS_COREDUMP_FUZZ_SEED") {
            out.push(std::fs::read(&p).expect("GPU_TOOLS_COREDUMP_FUZZ_SEED"));
        }
        for s in &out {
            CoreDump::from_bytes(s.clone()).expect("every seed reads unchanged");
        }
        eprintln!("fuzzing {} seed dumps", out.len());
        out
    })
}

fn cases() -> u32 {
    std::env::var("GPU_TOOLS_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// (header offset, data offset, data size, type) of each section of a seed (seeds are well formed).
fn sections(b: &[u8]) -> Vec<(usize, usize, usize, u32)> {
    let shoff = u64_at(b, 0x28) as usize;
    let mut count = u16::from_le_bytes([b[0x3c], b[0x3d]]) as usize;
    if count == 0 {
        count = u64_at(b, shoff + 0x20) as usize;
    }
    (0..count)
        .map(|i| {
            let h = shoff + 64 * i;
            let kind = u32::from_le_bytes(b[h + 4..h + 8].try_into().unwrap());
            (
                h,
                u64_at(b, h + 0x18) as usize,
                u64_at(b, h + 0x20) as usize,
                kind,
            )
        })
        .collect()
}

/// A value to write: edge values, small numbers, or anything.
fn value() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(1),
        Just(u64::MAX),
        Just(u64::from(u32::MAX)),
        Just(0x8000_0000),
        0u64..512,
        any::<u64>(),
    ]
}

fn write(b: &mut [u8], at: usize, width: usize, v: u64) {
    let end = (at + width).min(b.len());
    if at < end {
        b[at..end].copy_from_slice(&v.to_le_bytes()[..end - at]);
    }
}

/// Reads `bytes`; when that succeeds, touches everything the dump offers.
fn exercise(bytes: Vec<u8>) {
    let Ok(dump) = CoreDump::from_bytes(bytes) else {
        return;
    };
    let mut sum = 0u64;
    for l in dump.lanes() {
        sum = sum.wrapping_add(l.lane.pc);
        if let Some(g) = l.grid() {
            sum = sum.wrapping_add(g.kernel_name.as_ref().map_or(0, |n| n.len() as u64));
        }
        if let Some(f) = l.function() {
            sum = sum.wrapping_add(l.lane.pc.wrapping_sub(f.value));
        }
        sum = sum.wrapping_add(u64::from(l.is_active()));
        if let Some(m) = &l.lane.local_memory {
            sum = sum.wrapping_add(m.bytes().iter().map(|&b| u64::from(b)).sum::<u64>());
            let _ = m.read(m.address().wrapping_add(3), 5);
        }
        for r in l.lane.registers.iter().flatten() {
            sum = sum.wrapping_add(u64::from(*r));
        }
    }
    for d in dump.devices() {
        for g in &d.grids {
            if let Some(p) = &g.params {
                sum = sum.wrapping_add(p.len() as u64);
            }
            let _ = d.function_at(g.function_entry);
        }
        for m in d.modules() {
            let _ = m.relocated_image.as_ref().map(|r| r.bytes().len());
            let _ = m.function_at(0);
        }
        for sm in &d.sms {
            for b in &sm.blocks {
                if let Some(s) = &b.shared_memory {
                    let _ = s.read(s.address(), s.len());
                    let _ = s.contains(u64::MAX);
                }
            }
        }
    }
    for r in dump.global_memory().iter().chain(dump.managed_memory()) {
        let _ = dump.read_global(r.address(), r.len());
        let _ = dump.read_global(r.address().wrapping_add(r.len() as u64), 1);
    }
    std::hint::black_box(sum);
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn truncated_dumps(seed in any::<Index>(), cut in any::<Index>()) {
        let s = seed.get(seeds());
        let len = cut.index(s.len() + 1);
        exercise(s[..len].to_vec());
    }

    #[test]
    fn changed_elf_header(seed in any::<Index>(), at in 0usize..64, width in prop_oneof![Just(1usize), Just(2), Just(4), Just(8)], v in value()) {
        let mut b = seed.get(seeds()).clone();
        write(&mut b, at, width, v);
        exercise(b);
    }

    #[test]
    fn changed_section_headers(
        seed in any::<Index>(),
        pick in any::<Index>(),
        field in prop_oneof![Just((0usize, 4usize)), Just((4, 4)), Just((0x10, 8)), Just((0x18, 8)), Just((0x20, 8)), Just((0x28, 4)), Just((0x2c, 4)), Just((0x38, 8))],
        v in value(),
        nudge in -2i64..=2,
        use_nudge in any::<bool>(),
    ) {
        let mut b = seed.get(seeds()).clone();
        let secs = sections(&b);
        let (h, ..) = secs[pick.index(secs.len())];
        let (off, width) = field;
        let v = if use_nudge {
            // A neighbouring value: the next section, one entry more, one byte less.
            let old = match width {
                4 => u64::from(u32::from_le_bytes(b[h + off..h + off + 4].try_into().unwrap())),
                _ => u64_at(&b, h + off),
            };
            old.wrapping_add(nudge as u64)
        } else {
            v
        };
        write(&mut b, h + off, width, v);
        exercise(b);
    }

    #[test]
    fn changed_table_entries(seed in any::<Index>(), pick in any::<Index>(), at in any::<Index>(), width in prop_oneof![Just(1usize), Just(4), Just(8)], v in value()) {
        let mut b = seed.get(seeds()).clone();
        let tables: Vec<_> = sections(&b)
            .into_iter()
            .filter(|&(_, _, size, kind)| kind > 0x8000_0000 && size > 0)
            .collect();
        let (_, off, size, _) = tables[pick.index(tables.len())];
        write(&mut b, off + at.index(size), width, v);
        exercise(b);
    }

    #[test]
    fn flipped_bytes_anywhere(seed in any::<Index>(), flips in proptest::collection::vec((any::<Index>(), any::<u8>()), 1..16)) {
        let mut b = seed.get(seeds()).clone();
        for (at, v) in flips {
            let i = at.index(b.len());
            b[i] ^= v | 1;
        }
        exercise(b);
    }
}
