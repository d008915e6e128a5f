//! `cuda::graph` against the CUDA driver double, which holds graphs the test builds (`dbl_graph_*`): the kernels
//! of a graph in the order its edges give, whatever order the driver lists its nodes in, child graphs expanded,
//! names from functions and from library kernels, parallel branches and conditional nodes said, a driver without
//! the edge query refused, and whether a stream captures.
#![cfg(feature = "cupti")]

use std::ffi::{CStr, c_char, c_void};
use std::sync::{Mutex, MutexGuard, OnceLock};

use gpu_tools::cuda::Driver;
use gpu_tools::cuda::graph::{GraphKernels, RawGraph, stream_is_capturing};

struct Double {
    driver: &'static Driver,
    controls: libloading::Library,
}

/// The driver double, once per process, with one test at a time (its graphs and settings are process-wide).
fn double() -> (MutexGuard<'static, ()>, &'static Double) {
    static LOCK: Mutex<()> = Mutex::new(());
    static D: OnceLock<Double> = OnceLock::new();
    let guard = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let d = D.get_or_init(|| {
        let path = gpu_tools_testing::double_path("cuda_driver");
        let driver = Driver::load_from(&path).expect("the driver double loads");
        driver.init().expect("cuInit");
        // SAFETY: the file the crate opened: dlopen returns the same handle.
        let controls = unsafe { libloading::Library::new(&path) }.expect("its controls");
        Double { driver, controls }
    });
    (guard, d)
}

macro_rules! control {
    ($d:expr, $t:ty, $name:literal) => {
        // SAFETY: the symbol has this signature in cuda_driver.c.
        *unsafe { $d.controls.get::<$t>($name) }.unwrap_or_else(|e| panic!("{e}"))
    };
}

impl Double {
    fn graph(&self) -> RawGraph {
        let f = control!(
            self,
            unsafe extern "C" fn() -> RawGraph,
            b"dbl_graph_create\0"
        );
        // SAFETY: a plain control.
        let g = unsafe { f() };
        assert!(!g.is_null(), "room for another graph");
        g
    }

    /// A kernel node: `kind` 0 a function, 1 a library kernel handed over as a function, 2 a library kernel.
    fn kernel(&self, g: RawGraph, name: &CStr, kind: i32) -> i32 {
        let f = control!(
            self,
            unsafe extern "C" fn(RawGraph, *const c_char, i32) -> i32,
            b"dbl_graph_add_kernel\0"
        );
        // SAFETY: a graph of the double; the name is copied.
        let i = unsafe { f(g, name.as_ptr(), kind) };
        assert!(i >= 0);
        i
    }

    fn node(&self, g: RawGraph, ty: i32) -> i32 {
        let f = control!(
            self,
            unsafe extern "C" fn(RawGraph, i32) -> i32,
            b"dbl_graph_add_node\0"
        );
        // SAFETY: a graph of the double.
        unsafe { f(g, ty) }
    }

    fn child(&self, g: RawGraph, child: RawGraph) -> i32 {
        let f = control!(
            self,
            unsafe extern "C" fn(RawGraph, RawGraph) -> i32,
            b"dbl_graph_add_child\0"
        );
        // SAFETY: graphs of the double.
        unsafe { f(g, child) }
    }

    fn edges(&self, g: RawGraph, edges: &[(i32, i32)]) {
        let f = control!(
            self,
            unsafe extern "C" fn(RawGraph, i32, i32) -> i32,
            b"dbl_graph_add_edge\0"
        );
        for &(a, b) in edges {
            // SAFETY: a graph of the double.
            assert_eq!(unsafe { f(g, a, b) }, 0);
        }
    }

    fn edges_unsupported(&self, on: bool) {
        let f = control!(
            self,
            unsafe extern "C" fn(i32),
            b"dbl_graph_edges_unsupported\0"
        );
        // SAFETY: a plain control.
        unsafe { f(i32::from(on)) }
    }

    fn kernels(&self, g: RawGraph) -> GraphKernels {
        // SAFETY: a live graph of the double, used by this thread only.
        unsafe { GraphKernels::of_raw(self.driver, g) }.expect("the graph's kernels")
    }
}

fn names(g: &GraphKernels) -> Vec<&str> {
    g.kernels
        .iter()
        .map(|k| k.as_deref().unwrap_or("?"))
        .collect()
}

const MEMSET: i32 = 2;
const EMPTY: i32 = 5;
const CONDITIONAL: i32 = 13;

#[test]
fn a_chain_comes_in_dependency_order_with_child_graphs_in_place() {
    let (_g, d) = double();
    let child = d.graph();
    let x = d.kernel(child, c"child_x", 0);
    let y = d.kernel(child, c"child_y", 2);
    d.edges(child, &[(x, y)]);
    let g = d.graph();
    // Listed last-first: only the edges say the order.
    let last = d.kernel(g, c"_Z4lastv", 0);
    let sub = d.child(g, child);
    let set = d.node(g, MEMSET);
    let lib = d.kernel(g, c"library_kernel", 1);
    let first = d.kernel(g, c"triton_red_fused_0", 0);
    d.edges(g, &[(first, set), (set, lib), (lib, sub), (sub, last)]);
    let k = d.kernels(g);
    assert_eq!(
        names(&k),
        vec![
            "triton_red_fused_0",
            "library_kernel",
            "child_x",
            "child_y",
            "_Z4lastv"
        ]
    );
    assert!(k.ordered, "one chain");
    assert_eq!(k.conditional_nodes, 0);
}

#[test]
fn parallel_branches_and_conditional_nodes_are_said() {
    let (_g, d) = double();
    let g = d.graph();
    let a = d.kernel(g, c"a", 0);
    let b = d.kernel(g, c"b", 0);
    let c = d.kernel(g, c"c", 0);
    let join = d.node(g, EMPTY);
    let cond = d.node(g, CONDITIONAL);
    d.edges(g, &[(a, b), (a, c), (b, join), (c, join), (join, cond)]);
    let k = d.kernels(g);
    assert_eq!(
        names(&k),
        vec!["a", "b", "c"],
        "ties go to the node listed first"
    );
    assert!(!k.ordered, "b and c may run at the same time");
    assert_eq!(k.conditional_nodes, 1);
    let empty = d.graph();
    assert_eq!(
        d.kernels(empty),
        GraphKernels {
            kernels: vec![],
            ordered: true,
            conditional_nodes: 0
        }
    );
}

#[test]
fn a_driver_without_the_edge_query_is_an_error_not_a_guess() {
    let (_g, d) = double();
    let g = d.graph();
    d.kernel(g, c"a", 0);
    d.edges_unsupported(true);
    // SAFETY: a live graph of the double.
    let got = unsafe { GraphKernels::of_raw(d.driver, g) };
    d.edges_unsupported(false);
    let e = got.expect_err("no edges, no order");
    assert_eq!(e.name, "CUDA_ERROR_NOT_SUPPORTED");
}

#[test]
fn streams_that_capture_are_told_apart() {
    let (_g, d) = double();
    let set = control!(
        d,
        unsafe extern "C" fn(*mut c_void, i32),
        b"dbl_set_capturing\0"
    );
    let stream = 0x40 as gpu_tools::cuda::graph::RawStream;
    // SAFETY: opaque handle values; the double only compares them.
    unsafe {
        assert!(!stream_is_capturing(d.driver, stream).unwrap());
        set(stream.cast(), 1);
        assert!(stream_is_capturing(d.driver, stream).unwrap());
        assert!(
            !stream_is_capturing(d.driver, std::ptr::null_mut()).unwrap(),
            "another stream does not"
        );
        set(stream.cast(), 0);
        assert!(!stream_is_capturing(d.driver, stream).unwrap());
    }
}
