//! The keeping lender and the handler of unlent buffers: a keeping stop with a lender, buffers held until CUPTI
//! completes them, a late request, and the flush that gives another consumer its buffers first.

use std::sync::Mutex;

use super::{
    CONCURRENT_KERNEL, builder, kernel, leave_nothing_enabled, records, start, start_with,
};
use crate::common::{double, serial};
use gpu_tools::cupti::activity::ActivityKinds;

/// Buffers the stand-in lender lent (address, size), and those that came back to the stand-in handler of unlent
/// buffers (address, valid bytes).
static LENT: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());
static CAME_BACK: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

/// A consumer's request callback: 64 KiB, 8-byte aligned.
unsafe extern "C" fn stand_in_lender(buffer: *mut *mut u8, size: *mut usize, max: *mut usize) {
    let block: &'static mut [u64] = Box::leak(vec![0u64; 8192].into_boxed_slice());
    let ptr = block.as_mut_ptr().cast::<u8>();
    LENT.lock().unwrap().push((ptr as usize, 65536));
    // SAFETY: CUPTI's request callback is given valid out-pointers for the buffer, its size and its record limit.
    unsafe {
        *buffer = ptr;
        *size = 65536;
        *max = 0;
    }
}

unsafe extern "C" fn stand_in_unlent(
    _ctx: gpu_tools::sys::cupti::CUcontext,
    _stream: u32,
    buffer: *mut u8,
    _size: usize,
    valid: usize,
) {
    CAME_BACK.lock().unwrap().push((buffer as usize, valid));
}

/// The stand-in lender and handler of unlent buffers, set while it lives (cleared however the test ends).
struct StandInLender;

impl StandInLender {
    fn set() -> Self {
        // SAFETY: both stand-ins may be called from any thread with CUPTI's arguments and never unwind; the handler
        // takes every buffer the lender lends.
        unsafe {
            gpu_tools::cupti::activity::set_unlent_buffer_handler(Some(stand_in_unlent));
            gpu_tools::cupti::activity::set_keeping_lender(Some(stand_in_lender));
        }
        StandInLender
    }
}

impl Drop for StandInLender {
    fn drop(&mut self) {
        // SAFETY: clearing has no precondition.
        unsafe {
            gpu_tools::cupti::activity::set_unlent_buffer_handler(None);
            gpu_tools::cupti::activity::set_keeping_lender(None);
        }
    }
}

#[test]
fn a_stop_keeping_kinds_with_a_lender_drops_nothing_before_the_hand_back() {
    let _serial = serial();
    let d = double();
    LENT.lock().unwrap().clear();
    CAME_BACK.lock().unwrap().clear();
    let lender = StandInLender::set();
    let (tracer, sink) = start(ActivityKinds::MEMSET);
    assert_eq!(d.memset(1, 1, 1, 2, 0, 1), 1);
    assert!(
        LENT.lock().unwrap().is_empty(),
        "nothing lent while the pool serves"
    );
    let report = tracer
        .stop_keeping_then(ActivityKinds::MEMSET, || {
            // A record made before the other consumer's callbacks are in goes into a buffer of its own.
            assert_eq!(d.memset(2, 1, 1, 2, 0, 2), 1);
            // Completed while the tracer's callbacks are still in: it comes to the handler of unlent buffers.
            assert_eq!(d.flush_forced(), 0);
        })
        .unwrap();
    drop(lender);
    assert_eq!(report.dropped_after_stop, 0, "CUPTI had a buffer");
    assert_eq!(
        records(&sink).len(),
        1,
        "the window's record is the trace's"
    );
    let lent = LENT.lock().unwrap().clone();
    let came_back = CAME_BACK.lock().unwrap().clone();
    assert_eq!(lent.len(), 1, "one buffer lent: {lent:?}");
    assert_eq!(came_back.len(), 1, "and it came back: {came_back:?}");
    assert_eq!(came_back[0].0, lent[0].0);
    assert!(came_back[0].1 > 0, "holding the record");
    leave_nothing_enabled(ActivityKinds::MEMSET);
}

/// A buffer the keeping lender gave CUPTI during a stop is counted as held, up to a mark taken before, until CUPTI
/// completes it: a kernel still running keeps it in CUPTI through flushes without force (so whoever gives the other
/// consumer its callbacks back can wait for its records to be whole), and the next buffer, lent after the mark, is
/// not counted against it.
#[test]
fn buffers_of_the_keeping_lender_are_held_until_cupti_completes_them() {
    use gpu_tools::cupti::activity::{held_for_keeping, keeping_mark};
    let _serial = serial();
    let d = double();
    LENT.lock().unwrap().clear();
    CAME_BACK.lock().unwrap().clear();
    let lender = StandInLender::set();
    let kinds = ActivityKinds::CONCURRENT_KERNEL;
    let (tracer, _sink) = start(kinds);
    assert_eq!(kernel(1, 1_000), 1);
    let mut seen = Vec::new();
    tracer
        .stop_keeping_then(kinds, || {
            // The pool is closed: the kernel still running goes into a buffer of the lender's.
            d.set_in_flight(true);
            assert_eq!(kernel(2, 2_000), 1);
            d.set_in_flight(false);
            let mark = keeping_mark();
            seen.push(held_for_keeping(mark));
            assert_eq!(d.flush_completed(), 0);
            seen.push(held_for_keeping(mark));
            d.land();
            assert_eq!(d.flush_completed(), 0);
            seen.push(held_for_keeping(mark));
            // The next kernel takes a new buffer, lent after the mark.
            assert_eq!(kernel(3, 3_000), 1);
            seen.push(held_for_keeping(mark));
            seen.push(held_for_keeping(keeping_mark()));
            assert_eq!(d.flush_forced(), 0);
            seen.push(held_for_keeping(keeping_mark()));
            // One more, which CUPTI still holds when the other consumer's callbacks go back: completed to them
            // directly later, it never comes back here.
            assert_eq!(kernel(4, 4_000), 1);
            seen.push(held_for_keeping(keeping_mark()));
            OTHERS.lock().unwrap().clear();
            assert_eq!(
                d.record_as_another_consumer(
                    CONCURRENT_KERNEL,
                    stand_in_lender,
                    other_consumer_complete
                ),
                (0, 0)
            );
        })
        .unwrap();
    assert_eq!(
        held_for_keeping(keeping_mark()),
        0,
        "not waited for once the lending ended"
    );
    drop(lender);
    assert_eq!(
        seen,
        vec![1, 1, 0, 0, 1, 0, 1],
        "held through the default flush while its kernel ran, back once it ended; the next one after the mark"
    );
    let lent = LENT.lock().unwrap().clone();
    let came_back = CAME_BACK.lock().unwrap().clone();
    assert_eq!(lent.len(), 3, "{lent:?}");
    assert_eq!(came_back.len(), 2, "{came_back:?}");
    // The third goes to the other consumer at its flush.
    assert_eq!(d.flush_forced(), 0);
    let others = OTHERS.lock().unwrap().clone();
    assert_eq!(others.len(), 1, "{others:?}");
    assert_eq!(others[0].0, lent[2].0);
    leave_nothing_enabled(kinds);
}

/// CUPTI reads its request callback, then calls it without its lock: a request that reached the tracer's callback
/// after the other consumer's callbacks went in (the stop's end) still gets a buffer, from the lender, as long as
/// the lender is set; refused, CUPTI dropped the record (seen with the double's launching thread beside a stop).
#[test]
fn a_request_that_reaches_the_tracer_after_a_keeping_stop_gets_a_buffer_of_the_lender() {
    let _serial = serial();
    let d = double();
    LENT.lock().unwrap().clear();
    let lender = StandInLender::set();
    let kinds = ActivityKinds::CONCURRENT_KERNEL;
    let (tracer, _sink) = start(kinds);
    let late = d.current_request().expect("the tracer's request callback");
    tracer
        .stop_keeping_then(kinds, || {
            assert_eq!(
                d.record_as_another_consumer(
                    CONCURRENT_KERNEL,
                    stand_in_lender,
                    other_consumer_complete
                ),
                (0, 0)
            );
        })
        .unwrap();
    let ask = || {
        let (mut buffer, mut size, mut max) = (std::ptr::null_mut::<u8>(), 0usize, 0usize);
        // SAFETY: the tracer's request callback, called as CUPTI calls it, with valid out-pointers.
        unsafe { late(&mut buffer, &mut size, &mut max) };
        (buffer as usize, size)
    };
    let (buffer, size) = ask();
    assert!(
        buffer != 0 && size == 65536,
        "lent by the lender: {buffer:#x} {size}"
    );
    assert_eq!(LENT.lock().unwrap().last().map(|l| l.0), Some(buffer));
    drop(lender);
    assert_eq!(ask(), (0, 0), "none once the lender is cleared");
    leave_nothing_enabled(kinds);
}

/// Buffers another consumer got back through its own completion callback (address, valid bytes).
static OTHERS: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

unsafe extern "C" fn other_consumer_complete(
    _ctx: *mut std::ffi::c_void,
    _stream: u32,
    buffer: *mut u8,
    _size: usize,
    valid: usize,
) {
    OTHERS.lock().unwrap().push((buffer as usize, valid));
}

#[test]
fn a_tracer_told_to_flush_first_gives_another_consumer_what_cupti_holds_for_it_first() {
    let _serial = serial();
    let d = double();
    LENT.lock().unwrap().clear();
    CAME_BACK.lock().unwrap().clear();
    OTHERS.lock().unwrap().clear();
    // Another consumer records sets into a buffer of its own, which CUPTI holds.
    assert_eq!(
        d.record_as_another_consumer(2, stand_in_lender, other_consumer_complete),
        (0, 0)
    );
    assert_eq!(d.memset(1, 1, 1, 2, 0, 1), 1);
    assert!(OTHERS.lock().unwrap().is_empty());
    // SAFETY: the stand-in may be called from any thread with CUPTI's arguments and never unwinds.
    unsafe { gpu_tools::cupti::activity::set_unlent_buffer_handler(Some(stand_in_unlent)) };
    let (tracer, sink) = start_with(builder(ActivityKinds::MEMSET).flush_before_start(true));
    // Its buffer went back to it through its own callback, before the tracer's callbacks and clock went in.
    let others = OTHERS.lock().unwrap().clone();
    assert_eq!(others.len(), 1, "{others:?}");
    assert!(others[0].1 > 0, "with its record");
    assert!(
        CAME_BACK.lock().unwrap().is_empty(),
        "not through the tracer"
    );
    assert_eq!(d.memset(2, 1, 1, 2, 0, 2), 1);
    tracer.stop().unwrap();
    // SAFETY: clearing has no precondition.
    unsafe { gpu_tools::cupti::activity::set_unlent_buffer_handler(None) };
    assert_eq!(records(&sink).len(), 1, "the trace has its own record only");
    assert_eq!(d.stats().enabled_mask, 0);
}
