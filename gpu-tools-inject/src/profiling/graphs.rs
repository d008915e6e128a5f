//! The kernels of each executable CUDA graph, read from its graph when CUPTI reports the executable made
//! (`gpu_tools::cuda::graph::GraphKernels`), so that a graph launch can queue one expected range per kernel node.
//! They are read then because a program may destroy the graph once it has the executable (PyTorch does).

use std::collections::HashMap;
use std::sync::Arc;

use gpu_tools::cuda::graph::GraphKernels;

use super::ranges::GraphRun;

/// What a launch of one executable graph yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GraphPlan {
    /// The graph's name: `graph 7 (12 kernels)`, or `graph 7 (kernels unknown)`.
    pub name: Arc<str>,
    /// Its kernels, in the order its ranges come; `None` when they are not known (the launch's ranges are then
    /// isolated by decoding around it).
    pub kernels: Option<Vec<Arc<str>>>,
}

/// Why the ranges of a graph's launches cannot all be named after their kernels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PlanWarning {
    /// What to say.
    pub text: String,
    /// Only the order of kernels that may run at the same time is unsure (nothing when a graph launch makes one
    /// record).
    pub order_only: bool,
}

/// The plans of the live executable graphs, by handle.
#[derive(Debug, Default)]
pub(crate) struct Graphs {
    plans: HashMap<usize, Arc<GraphPlan>>,
    launches: u64,
    /// Executable graphs launched but never reported made.
    unreported: u32,
}

impl Graphs {
    /// Notes an executable graph (`exec`) made from the graph CUPTI numbers `id`, with what reading its kernels
    /// gave. Returns a warning to send when its ranges cannot all be named after their kernels.
    pub(crate) fn created(
        &mut self,
        exec: usize,
        id: u32,
        read: Result<GraphKernels, String>,
        mut intern: impl FnMut(&str) -> Arc<str>,
    ) -> Option<PlanWarning> {
        let (plan, warning) = match read {
            Ok(g) if g.conditional_nodes == 0 => {
                let n = g.kernels.len();
                let kernels: Vec<Arc<str>> = g
                    .kernels
                    .iter()
                    .enumerate()
                    .map(|(k, name)| match name {
                        Some(name) => intern(name),
                        None => intern(&format!("graph {id} kernel #{k}")),
                    })
                    .collect();
                let warning = (!g.ordered).then(|| PlanWarning {
                    order_only: true,
                    text: format!(
                        "graph {id}: its {n} kernels are not one chain (parallel branches); their ranges are named \
                         in one order the graph allows, so kernels that may run at the same time may have their \
                         names swapped"
                    ),
                });
                let plural = if n == 1 { "" } else { "s" };
                (
                    GraphPlan {
                        name: Arc::from(format!("graph {id} ({n} kernel{plural})")),
                        kernels: Some(kernels),
                    },
                    warning,
                )
            }
            Ok(g) => (
                GraphPlan {
                    name: Arc::from(format!("graph {id} (kernels unknown)")),
                    kernels: None,
                },
                Some(PlanWarning {
                    order_only: false,
                    text: format!(
                        "graph {id}: {} conditional nodes run kernels as often as the device decides; the ranges \
                         of its launches are named \"graph {id} (kernels unknown) kernel #N\"",
                        g.conditional_nodes
                    ),
                }),
            ),
            Err(e) => (
                GraphPlan {
                    name: Arc::from(format!("graph {id} (kernels unknown)")),
                    kernels: None,
                },
                Some(PlanWarning {
                    order_only: false,
                    text: format!(
                        "graph {id}: its kernels could not be read ({e}); the ranges of its launches are named \
                         \"graph {id} (kernels unknown) kernel #N\""
                    ),
                }),
            ),
        };
        self.plans.insert(exec, Arc::new(plan));
        warning
    }

    /// A plan for a launched executable graph never reported made (CUPTI gave no callback for it): its kernels
    /// unknown. Returns it with the warning to send (once: the plan is kept).
    pub(crate) fn unreported(&mut self, exec: usize) -> (Arc<GraphPlan>, String) {
        self.unreported += 1;
        let name = format!("graph exec #{} (kernels unknown)", self.unreported);
        let warning = format!(
            "an executable graph was launched that CUPTI never reported made; the ranges of its launches are named \
             \"{name} kernel #N\""
        );
        let plan = Arc::new(GraphPlan {
            name: Arc::from(name),
            kernels: None,
        });
        self.plans.insert(exec, Arc::clone(&plan));
        (plan, warning)
    }

    /// Forgets an executable graph being destroyed (a new one may get its handle).
    pub(crate) fn destroyed(&mut self, exec: usize) {
        self.plans.remove(&exec);
    }

    /// The plan of a launched executable graph; `None` for one never reported made.
    pub(crate) fn plan(&self, exec: usize) -> Option<Arc<GraphPlan>> {
        self.plans.get(&exec).cloned()
    }

    /// A new launch of a graph named `name`.
    pub(crate) fn run(&mut self, name: &Arc<str>) -> GraphRun {
        self.launches += 1;
        GraphRun {
            name: Arc::clone(name),
            seq: self.launches,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intern(s: &str) -> Arc<str> {
        Arc::from(s)
    }

    #[test]
    fn plans_name_graphs_and_their_kernels() {
        let mut g = Graphs::default();
        let read = GraphKernels {
            kernels: vec![Some("a".into()), None, Some("a".into())],
            ordered: true,
            conditional_nodes: 0,
        };
        assert_eq!(g.created(0x10, 7, Ok(read), intern), None);
        let plan = g.plan(0x10).unwrap();
        assert_eq!(&*plan.name, "graph 7 (3 kernels)");
        let names: Vec<&str> = plan
            .kernels
            .as_ref()
            .unwrap()
            .iter()
            .map(|k| &**k)
            .collect();
        assert_eq!(names, vec!["a", "graph 7 kernel #1", "a"]);
        let (r1, r2) = (g.run(&plan.name), g.run(&plan.name));
        assert_ne!(r1.seq, r2.seq, "each launch is told apart");
        g.destroyed(0x10);
        assert_eq!(g.plan(0x10), None);
        let (plan, w) = g.unreported(0x10);
        assert_eq!(&*plan.name, "graph exec #1 (kernels unknown)");
        assert!(w.contains("never reported"), "{w}");
        assert_eq!(g.plan(0x10), Some(plan), "said once, then kept");
    }

    #[test]
    fn unknown_or_unordered_kernels_are_said() {
        let mut g = Graphs::default();
        let branches = GraphKernels {
            kernels: vec![Some("a".into())],
            ordered: false,
            conditional_nodes: 0,
        };
        let w = g.created(1, 2, Ok(branches), intern).unwrap();
        assert!(w.order_only);
        assert!(
            w.text.contains("graph 2") && w.text.contains("parallel branches"),
            "{w:?}"
        );
        assert_eq!(&*g.plan(1).unwrap().name, "graph 2 (1 kernel)");
        let conditional = GraphKernels {
            kernels: vec![],
            ordered: true,
            conditional_nodes: 1,
        };
        let w = g.created(3, 4, Ok(conditional), intern).unwrap();
        assert!(!w.order_only && w.text.contains("conditional"), "{w:?}");
        assert_eq!(g.plan(3).unwrap().kernels, None);
        let w = g
            .created(5, 6, Err("CUDA_ERROR_NOT_SUPPORTED".into()), intern)
            .unwrap();
        assert!(!w.order_only && w.text.contains("NOT_SUPPORTED"), "{w:?}");
        assert_eq!(&*g.plan(5).unwrap().name, "graph 6 (kernels unknown)");
    }
}
