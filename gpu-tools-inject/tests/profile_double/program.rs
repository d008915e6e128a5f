//! The child side: the stand-in CUDA program this binary plays, the scenario its environment names, launched with
//! the library or attached to.

use std::ffi::c_void;
use std::path::Path;

use crate::controls::{Controls, GRAPHEXEC_DESTROY_STARTING, MEMSET_NODE, control};
use crate::support::SCENARIO;

fn initialize(lib: &Path) -> libloading::Library {
    // SAFETY: the library's initialisers only set up Rust statics.
    let lib = unsafe { libloading::Library::new(lib) }.expect("dlopen the library");
    // SAFETY: `int InitializeInjection(void)`, as CUDA calls it.
    let init =
        unsafe { lib.get::<unsafe extern "C" fn() -> i32>(b"InitializeInjection\0") }.unwrap();
    // SAFETY: no arguments; CUDA would call it from cuInit.
    assert_eq!(unsafe { init() }, 1, "tracing runs");
    lib
}

/// The child side: a stand-in CUDA program with the library injected.
#[test]
#[ignore = "the child process of the other tests"]
fn child() {
    let Ok(scenario) = std::env::var(SCENARIO) else {
        return;
    };
    let c = Controls::open();
    if scenario == "other-subscriber" || scenario == "attach-other-subscriber" {
        c.other_subscriber(c"torch.profiler");
    }
    if scenario.starts_with("attach") {
        return attached_child(&c);
    }
    let _lib = initialize(&gpu_tools_testing::inject_lib());
    if scenario != "graphs" {
        // A process that loads CUDA and never makes a context (a compile worker), or that could not subscribe.
        return;
    }
    let ctx = gpu_tools::cuda::Context::primary(0).expect("a context of the driver double");
    let raw = ctx.as_raw().cast::<c_void>();
    c.context_created(raw);
    // 1. copy; a launch that is captured; graph 7 twice; copy.
    c.launch(raw, 0, c"copy", 1, true);
    c.capturing(0x5, true);
    c.launch(raw, 0x5, c"captured", 2, false);
    c.capturing(0x5, false);
    let g7 = c.graph();
    let child = c.graph();
    let x = c.kernel(child, c"k_x", 0);
    assert_eq!(x, 0);
    // Listed out of order: the edges decide.
    let k_c = c.kernel(g7, c"k_c", 2);
    let memset = c.node(g7, MEMSET_NODE);
    let k_a = c.kernel(g7, c"k_a", 0);
    let k_b = c.kernel(g7, c"k_b", 1);
    let sub = c.child(g7, child);
    c.edge(g7, k_a, memset);
    c.edge(g7, memset, k_b);
    c.edge(g7, k_b, k_c);
    c.edge(g7, k_c, sub);
    c.exec_created(raw, g7, 0xE7, 7);
    c.graph_launch(raw, 0xE7, 3, 4);
    c.graph_launch(raw, 0xE7, 4, 4);
    c.launch(raw, 0, c"copy", 5, true);
    // 2. graph 9, its edges unreadable.
    let g9 = c.graph();
    c.kernel(g9, c"k_y", 0);
    c.edges_unsupported(true);
    c.exec_created(raw, g9, 0xE9, 9);
    c.edges_unsupported(false);
    c.graph_launch(raw, 0xE9, 6, 2);
    // 3. copy.
    c.launch(raw, 0, c"copy", 7, true);
    c.graph_event(GRAPHEXEC_DESTROY_STARTING, raw, std::ptr::null_mut(), 0xE7);
    // The exit handler decodes the rest and ends the stream.
    drop(ctx);
}

/// The child of the attach tests: a program that made its context before any library was injected; it answers
/// lines on stdin with `done ...`: `launch NAME CORR` fires the launch callbacks (if any are enabled) and runs the
/// kernel; `after` launches once more and says whether its callbacks were delivered and its range counted; `pc
/// kernels` has the next PC sampling window sample a kernel of its (without it a window has no stall record); `spin
/// on` keeps threads of its busy on the CPU until `spin off`.
fn attached_child(c: &Controls) {
    use std::io::Write;
    let ctx = gpu_tools::cuda::Context::primary(0).expect("a context of the driver double");
    let raw = ctx.as_raw().cast::<c_void>();
    for line in std::io::stdin().lines() {
        let line = line.unwrap();
        let words: Vec<&str> = line.split_whitespace().collect();
        let reply = match words.as_slice() {
            ["ready"] => "ready".to_string(),
            ["launch", name, corr] => {
                let name = std::ffi::CString::new(*name).unwrap();
                c.launch_maybe_watched(raw, &name, corr.parse().unwrap());
                "launched".to_string()
            }
            ["graph", corr] => {
                // A graph the program instantiated before the attach, of two kernels.
                c.graph_launch(raw, 0x6000, corr.parse().unwrap(), 2);
                "launched".to_string()
            }
            ["capture", corr] => {
                // A stream capture begins (its callbacks, when enabled).
                let params = [0usize; 2];
                c.api_delivered(
                    c"cuStreamBeginCapture_v2",
                    None,
                    params.as_ptr().cast(),
                    raw,
                    corr.parse().unwrap(),
                );
                "launched".to_string()
            }
            ["after"] => {
                let (delivered, counted) = c.launch_maybe_watched(raw, c"late", 99);
                let enables = control!(
                    c.cupti,
                    unsafe extern "C" fn() -> u32,
                    b"cp_range_enables\0"
                );
                format!(
                    "callbacks {}, ranges {}, range profilers enabled {}",
                    u32::from(delivered),
                    u32::from(counted),
                    // SAFETY: reads a counter of the double.
                    unsafe { enables() }
                )
            }
            ["pc"] => {
                let reads = control!(
                    c.cupti,
                    unsafe extern "C" fn() -> u32,
                    b"cp_pc_reads_while_decoding\0"
                );
                let period = control!(c.cupti, unsafe extern "C" fn() -> u32, b"cp_pc_period\0");
                // SAFETY: reads counters of the double.
                unsafe { format!("pc reads while decoding {}, period {}", reads(), period()) }
            }
            ["pc", "kernels"] => {
                // The next PC sampling window samples a kernel of the program's (one stall record).
                let at_enable = control!(
                    c.cupti,
                    unsafe extern "C" fn(*const std::ffi::c_char, u64, u32, u32) -> i32,
                    b"cp_pc_at_enable\0"
                );
                // SAFETY: a static name the double keeps a pointer to; 4 is a stall reason index the double lists.
                let added = unsafe { at_enable(c"k_sampled".as_ptr(), 0x40, 4, 12) };
                format!("pc kernels {added}")
            }
            ["pc", "worker"] => {
                // Each PC sampling window from now on has a thread of the sampling's own busy on the CPU (CUPTI's
                // and the driver's threads, born with the sampling).
                let spins = control!(c.cupti, unsafe extern "C" fn(i32), b"cp_pc_worker_spins\0");
                // SAFETY: sets a flag of the double.
                unsafe { spins(1) };
                "pc worker on".to_string()
            }
            ["spin", on] => {
                // Threads of the program's busy on the CPU (no launch) until `spin off`: four, so that the program
                // counts as running on a machine busy with other tests too.
                static SPIN: std::sync::atomic::AtomicBool =
                    std::sync::atomic::AtomicBool::new(false);
                let on = *on == "on";
                if on && !SPIN.swap(true, std::sync::atomic::Ordering::SeqCst) {
                    for _ in 0..4 {
                        std::thread::spawn(|| {
                            let mut x = 0u64;
                            while SPIN.load(std::sync::atomic::Ordering::SeqCst) {
                                x = std::hint::black_box(x.wrapping_add(1));
                            }
                        });
                    }
                } else if !on {
                    SPIN.store(false, std::sync::atomic::Ordering::SeqCst);
                }
                format!("spin {}", if on { "on" } else { "off" })
            }
            ["api"] => {
                let choices = control!(c.cupti, unsafe extern "C" fn() -> u64, b"cd_api_choices\0");
                let off = control!(
                    c.cupti,
                    unsafe extern "C" fn() -> i32,
                    b"cd_api_off_count\0"
                );
                // SAFETY: reads counters of the double.
                unsafe { format!("api choices {} off {}", choices(), off()) }
            }
            ["exit"] => {
                println!("done exit");
                return;
            }
            other => panic!("unknown command {other:?}"),
        };
        println!("done {reply}");
        std::io::stdout().flush().unwrap();
    }
}
