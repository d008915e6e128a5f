//! libFuzzer target: any bytes given to the core-dump reader give a dump or a `CoreDumpError`, and every accessor
//! of a dump that was read stays in bounds.
#![no_main]

use gpu_tools::coredump::CoreDump;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(dump) = CoreDump::from_bytes(data.to_vec()) else {
        return;
    };
    let mut sum = 0u64;
    for l in dump.lanes() {
        sum = sum.wrapping_add(l.lane.pc);
        if let Some(f) = l.function() {
            sum = sum.wrapping_add(l.lane.pc.wrapping_sub(f.value));
        }
        if let Some(g) = l.grid() {
            sum = sum.wrapping_add(g.kernel_name.as_ref().map_or(0, |n| n.len() as u64));
        }
        if let Some(m) = &l.lane.local_memory {
            sum = sum.wrapping_add(m.bytes().len() as u64);
            let _ = m.read(m.address().wrapping_add(1), 7);
        }
        sum = sum.wrapping_add(u64::from(l.is_active()));
    }
    for d in dump.devices() {
        for g in &d.grids {
            let _ = d.function_at(g.function_entry);
            let _ = g.params.as_ref().map(|p| p.bytes().len());
        }
        for sm in &d.sms {
            for b in &sm.blocks {
                let _ = b.shared_memory.as_ref().map(|s| s.read(s.address(), s.len()));
            }
        }
    }
    for r in dump.global_memory() {
        let _ = dump.read_global(r.address(), r.len());
    }
    std::hint::black_box(sum);
});
