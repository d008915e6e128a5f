//! What a CUDA graph runs, read from the driver: its kernels in an order the graph allows
//! ([`GraphKernels::of_raw`]), and whether a stream captures work into a graph instead of running it
//! ([`stream_is_capturing`]). A tool that sees one launch call for a whole graph (`cuGraphLaunch`) and one result
//! per kernel (a profiler that replays each kernel of the graph on its own, in order) needs both to name its
//! results.
//!
//! The order: the graph's nodes are walked in dependency order; child graphs are expanded where their node is;
//! when several kernels could run next (parallel branches), the one the driver lists first (`cuGraphGetNodes`)
//! is taken, and [`GraphKernels::ordered`] says the order was not the only one possible. Kernels in the bodies of
//! conditional nodes run as often as the device decides: they are not listed, and
//! [`GraphKernels::conditional_nodes`] counts those nodes.

use std::collections::BTreeSet;
use std::ffi::{CStr, c_char};

use super::{CudaError, Driver, sys};

/// A raw CUDA graph handle (`CUgraph`).
pub type RawGraph = sys::CUgraph;
/// A raw CUDA stream handle (`CUstream`).
pub type RawStream = sys::CUstream;

/// Child graphs nest at most this deep (a deeper one is refused as a cycle would be).
const MAX_DEPTH: usize = 16;

/// The kernels of a graph, in an order the graph allows.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GraphKernels {
    /// Each kernel's name as the driver gives it (mangled for C++ kernels), `None` where it gives none.
    pub kernels: Vec<Option<String>>,
    /// Whether this order is the only one the graph allows: its kernels, child graphs included, form one chain.
    pub ordered: bool,
    /// Conditional nodes: the kernels of their bodies are not in [`kernels`](Self::kernels).
    pub conditional_nodes: usize,
}

impl GraphKernels {
    /// Reads the kernels of `graph`.
    ///
    /// # Safety
    /// `graph` must be a live graph of the driver this crate loaded, not changed by another thread during the
    /// call (CUDA graphs are not thread-safe).
    pub unsafe fn of_raw(driver: &Driver, graph: RawGraph) -> Result<GraphKernels, CudaError> {
        // SAFETY: the caller's contract.
        unsafe { walk(driver, graph, 0) }
    }
}

/// Whether work sent to `stream` is captured into a graph (and so does not run now). `Ok(false)` where the driver
/// lacks the query.
///
/// # Safety
/// `stream` must be a stream of the driver this crate loaded (or one of its special handles: 0, legacy,
/// per-thread), alive during the call.
pub unsafe fn stream_is_capturing(driver: &Driver, stream: RawStream) -> Result<bool, CudaError> {
    let Some(f) = driver.api().cu_stream_is_capturing else {
        return Ok(false);
    };
    let mut status = sys::CU_STREAM_CAPTURE_STATUS_NONE;
    // SAFETY: the caller's stream; a valid out-pointer.
    driver.check_call("cuStreamIsCapturing", unsafe { f(stream, &mut status) })?;
    // A capture invalidated by an error still does not run the work.
    Ok(status != sys::CU_STREAM_CAPTURE_STATUS_NONE)
}

fn supported<T>(driver: &Driver, f: Option<T>) -> Result<T, CudaError> {
    f.ok_or_else(|| CudaError::from_code(driver, sys::CUDA_ERROR_NOT_SUPPORTED))
}

/// # Safety
/// As [`GraphKernels::of_raw`].
unsafe fn walk(driver: &Driver, graph: RawGraph, depth: usize) -> Result<GraphKernels, CudaError> {
    if depth > MAX_DEPTH {
        return Err(CudaError::from_code(driver, sys::CUDA_ERROR_INVALID_VALUE));
    }
    let api = driver.api();
    let get_nodes = supported(driver, api.cu_graph_get_nodes)?;
    let get_edges = supported(driver, api.cu_graph_get_edges)?;
    let get_type = supported(driver, api.cu_graph_node_get_type)?;
    let mut n = 0usize;
    // SAFETY: a live graph; a null array asks for the count.
    driver.check_call("cuGraphGetNodes", unsafe {
        get_nodes(graph, std::ptr::null_mut(), &mut n)
    })?;
    let mut nodes: Vec<sys::CUgraphNode> = vec![std::ptr::null_mut(); n];
    // SAFETY: room for `n` nodes; the driver writes at most `n` and the count it wrote.
    driver.check_call("cuGraphGetNodes", unsafe {
        get_nodes(graph, nodes.as_mut_ptr(), &mut n)
    })?;
    nodes.truncate(n);
    let mut e = 0usize;
    // SAFETY: null arrays ask for the count.
    driver.check_call("cuGraphGetEdges_v2", unsafe {
        get_edges(
            graph,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut e,
        )
    })?;
    let mut from: Vec<sys::CUgraphNode> = vec![std::ptr::null_mut(); e];
    let mut to: Vec<sys::CUgraphNode> = vec![std::ptr::null_mut(); e];
    // Edge data is asked for too: without it the driver refuses graphs whose edges carry any
    // (CUDA_ERROR_LOSSY_QUERY).
    let mut data = vec![sys::CUgraphEdgeData::default(); e];
    // SAFETY: three arrays of `e` entries; the driver writes at most `e` and the count it wrote.
    driver.check_call("cuGraphGetEdges_v2", unsafe {
        get_edges(
            graph,
            from.as_mut_ptr(),
            to.as_mut_ptr(),
            data.as_mut_ptr(),
            &mut e,
        )
    })?;
    let index = |node: sys::CUgraphNode| nodes.iter().position(|x| *x == node);
    let edges: Vec<(usize, usize)> = from
        .iter()
        .zip(&to)
        .take(e)
        .filter_map(|(a, b)| Some((index(*a)?, index(*b)?)))
        .collect();
    let mut out = GraphKernels {
        ordered: true,
        ..GraphKernels::default()
    };
    let mut items: Vec<Vec<Option<String>>> = Vec::with_capacity(nodes.len());
    for &node in &nodes {
        let mut kind = 0;
        // SAFETY: a node of the live graph; a valid out-pointer.
        driver.check_call("cuGraphNodeGetType", unsafe { get_type(node, &mut kind) })?;
        items.push(match kind {
            // SAFETY: a kernel node of the live graph.
            sys::CU_GRAPH_NODE_TYPE_KERNEL => vec![unsafe { kernel_name(driver, node) }],
            sys::CU_GRAPH_NODE_TYPE_GRAPH => {
                let child_of = supported(driver, api.cu_graph_child_graph_node_get_graph)?;
                let mut child = std::ptr::null_mut();
                // SAFETY: a child-graph node of the live graph; a valid out-pointer. The child belongs to it.
                driver.check_call("cuGraphChildGraphNodeGetGraph", unsafe {
                    child_of(node, &mut child)
                })?;
                // SAFETY: the child graph lives as long as its node, and the caller's contract covers it.
                let inner = unsafe { walk(driver, child, depth + 1) }?;
                out.ordered &= inner.ordered;
                out.conditional_nodes += inner.conditional_nodes;
                inner.kernels
            }
            sys::CU_GRAPH_NODE_TYPE_CONDITIONAL => {
                out.conditional_nodes += 1;
                Vec::new()
            }
            _ => Vec::new(),
        });
    }
    let Some((kernels, forced)) = order(&items, &edges) else {
        // Not a graph the driver would run (a cycle).
        return Err(CudaError::from_code(driver, sys::CUDA_ERROR_INVALID_VALUE));
    };
    out.kernels = kernels;
    out.ordered &= forced;
    Ok(out)
}

/// The name of a kernel node's function: `cuFuncGetName` on its function, else `cuKernelGetName` on its library
/// kernel (a node may hold either; a library kernel may also be handed over as a function).
///
/// # Safety
/// `node` is a kernel node of a live graph.
unsafe fn kernel_name(driver: &Driver, node: sys::CUgraphNode) -> Option<String> {
    let api = driver.api();
    let get_params = api.cu_graph_kernel_node_get_params?;
    let mut params = sys::CUDA_KERNEL_NODE_PARAMS::default();
    // SAFETY: a kernel node; a valid out-pointer to the v2 struct this entry point fills.
    if unsafe { get_params(node, &mut params) } != sys::CUDA_SUCCESS {
        return None;
    }
    let text = |p: *const c_char| {
        // SAFETY: the driver's NUL-terminated name, valid while the function is loaded.
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    };
    if let (Some(f), false) = (api.cu_func_get_name, params.func.is_null()) {
        let mut name = std::ptr::null();
        // SAFETY: the node's function; a valid out-pointer.
        if unsafe { f(&mut name, params.func) } == sys::CUDA_SUCCESS {
            if let Some(n) = text(name) {
                return Some(n);
            }
        }
    }
    let kernel = if params.kern.is_null() {
        params.func.cast::<sys::CUkern_st>()
    } else {
        params.kern
    };
    let f = api.cu_kernel_get_name?;
    if kernel.is_null() {
        return None;
    }
    let mut name = std::ptr::null();
    // SAFETY: the node's library kernel (or its function, which CUDA accepts in its place); a valid out-pointer.
    if unsafe { f(&mut name, kernel) } == sys::CUDA_SUCCESS {
        text(name)
    } else {
        None
    }
}

/// Orders the entries of the nodes (`items[i]`: what node `i` contributes, empty for most) along the edges
/// (from, to): a node comes after every node it depends on; ready nodes with no entries go first (they change
/// nothing in the order of entries); of several ready nodes with entries, the lowest index. Returns the entries
/// in that order and whether the order was forced (never two nodes with entries ready at once), or `None` for a
/// cycle.
fn order<T: Clone>(items: &[Vec<T>], edges: &[(usize, usize)]) -> Option<(Vec<T>, bool)> {
    let n = items.len();
    let mut waits = vec![0usize; n];
    let mut next: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &(a, b) in edges {
        if a < n && b < n {
            waits[b] += 1;
            next[a].push(b);
        }
    }
    let mut quiet: Vec<usize> = Vec::new();
    let mut loud: BTreeSet<usize> = BTreeSet::new();
    for (i, w) in waits.iter().enumerate() {
        if *w == 0 {
            if items[i].is_empty() {
                quiet.push(i);
            } else {
                loud.insert(i);
            }
        }
    }
    let mut out = Vec::new();
    let mut forced = true;
    let mut done = 0;
    loop {
        let i = if let Some(i) = quiet.pop() {
            i
        } else if let Some(&i) = loud.iter().next() {
            forced &= loud.len() == 1;
            loud.remove(&i);
            out.extend(items[i].iter().cloned());
            i
        } else {
            break;
        };
        done += 1;
        for &j in &next[i] {
            waits[j] -= 1;
            if waits[j] == 0 {
                if items[j].is_empty() {
                    quiet.push(j);
                } else {
                    loud.insert(j);
                }
            }
        }
    }
    (done == n).then_some((out, forced))
}

#[cfg(test)]
mod tests {
    use super::order;

    fn k(name: &str) -> Vec<&str> {
        vec![name]
    }

    #[test]
    fn a_chain_is_ordered_whatever_the_node_order() {
        // c <- memset <- b <- a, listed backwards.
        let items = vec![k("c"), vec![], k("b"), k("a")];
        let edges = [(3, 2), (2, 1), (1, 0)];
        assert_eq!(order(&items, &edges), Some((vec!["a", "b", "c"], true)));
    }

    #[test]
    fn parallel_branches_take_the_first_listed_and_say_so() {
        // a -> {b, c} -> d
        let items = vec![k("a"), k("c"), k("b"), k("d")];
        let edges = [(0, 1), (0, 2), (1, 3), (2, 3)];
        assert_eq!(
            order(&items, &edges),
            Some((vec!["a", "c", "b", "d"], false))
        );
        // Two kernels joined through an empty node are still one chain.
        let items = vec![k("a"), vec![], k("b")];
        assert_eq!(
            order(&items, &[(0, 1), (1, 2)]),
            Some((vec!["a", "b"], true))
        );
    }

    #[test]
    fn a_node_with_several_entries_keeps_them_together() {
        // A child graph of two kernels between two kernels.
        let items = vec![k("a"), vec!["x", "y"], k("b")];
        assert_eq!(
            order(&items, &[(0, 1), (1, 2)]),
            Some((vec!["a", "x", "y", "b"], true))
        );
    }

    #[test]
    fn cycles_and_empty_graphs() {
        let items = vec![k("a"), k("b")];
        assert_eq!(order(&items, &[(0, 1), (1, 0)]), None);
        assert_eq!(order::<&str>(&[], &[]), Some((vec![], true)));
        // Out-of-range edges are ignored.
        assert_eq!(order(&items, &[(0, 9)]), Some((vec!["a", "b"], false)));
    }
}
