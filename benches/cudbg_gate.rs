//! The cost of the crate's gated call into the debugger API table against calling the slot directly, and of
//! decoding a raw `CUDBGEvent` into the typed `Event` against reading its fields by hand. Runs without a GPU: the
//! table is a stand-in whose `getNumDevices` answers at once, so the figures are the crate's own overhead (a real
//! call to the driver takes about 10 us).
//!
//! `cargo bench --bench cudbg_gate`

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use gpu_tools::cudbg::api::Api;
use gpu_tools::cudbg::{ApiVersion, Event};
use gpu_tools::sys::cudbg as sys;

unsafe extern "C" fn num_devices(n: *mut u32) -> sys::CUDBGResult {
    // SAFETY: the callers pass a valid out-pointer.
    unsafe { *n = 2 };
    sys::CUDBG_SUCCESS
}

fn gate(c: &mut Criterion) {
    let table = Box::new(sys::CUDBGAPI_st {
        getNumDevices: Some(num_devices),
        ..Default::default()
    });
    // SAFETY: the table outlives `api`; every slot of the header's revision is readable (unset ones are None).
    let api = unsafe { Api::from_raw(&*table, ApiVersion::HEADER) };
    let mut g = c.benchmark_group("getNumDevices");
    g.bench_function("crate (gated)", |b| {
        b.iter(|| black_box(&api).num_devices().expect("stand-in succeeds"))
    });
    g.bench_function("raw slot", |b| {
        b.iter(|| {
            let f = black_box(&*table).getNumDevices.expect("set above");
            let mut n = 0;
            // SAFETY: valid out-pointer.
            let rc = unsafe { f(&mut n) };
            assert_eq!(rc, sys::CUDBG_SUCCESS);
            n
        })
    });
    g.finish();
}

fn decode(c: &mut Criterion) {
    let mut raw = sys::CUDBGEvent {
        kind: sys::CUDBG_EVENT_KERNEL_READY,
        ..Default::default()
    };
    // Writing a union member is safe; the kind selects kernelReady.
    raw.cases.kernelReady.gridId = 7;
    raw.cases.kernelReady.gridDim.x = 2;
    raw.cases.kernelReady.blockDim.x = 32;
    let mut g = c.benchmark_group("KERNEL_READY event");
    g.bench_function("crate (typed Event)", |b| {
        b.iter(|| match Event::from_raw(black_box(&raw)) {
            Event::KernelReady(k) => k.grid_id + u64::from(k.grid_dim.x) + u64::from(k.block_dim.x),
            _ => 0,
        })
    });
    g.bench_function("raw fields", |b| {
        b.iter(|| {
            let r = black_box(&raw);
            if r.kind == sys::CUDBG_EVENT_KERNEL_READY {
                // SAFETY: the kind selects the kernelReady member; packed fields are read by value.
                unsafe {
                    let k = r.cases.kernelReady;
                    k.gridId + u64::from(k.gridDim.x) + u64::from(k.blockDim.x)
                }
            } else {
                0
            }
        })
    });
    g.finish();
}

criterion_group!(benches, gate, decode);
criterion_main!(benches);
