//! Flows: a launch or copy call and the device work it issued, tied by an arrow whichever of them comes first;
//! the first held (per stream and correlation id, bounded) until the other arrives, else written without a flow.

use std::collections::HashSet;
use std::io;

use super::state::{Held, MAX_OPEN, Waiting};
use super::{Timeline, TimelineSink};

/// Notes that the flow of `correlation` was drawn (a bounded set: forgotten wholesale when full).
fn remember(paired: &mut HashSet<u32>, correlation: u32) {
    if paired.len() >= MAX_OPEN {
        paired.clear();
    }
    paired.insert(correlation);
}

/// Writes held slices without a flow.
fn write_unpaired(sink: &mut impl TimelineSink, waiting: Waiting) -> io::Result<()> {
    match waiting {
        Waiting::Call(call) => sink.slice(&call.slice(None, None)),
        Waiting::Work(work) => work
            .iter()
            .try_for_each(|w| sink.slice(&w.slice(None, None))),
    }
}

impl<S: TimelineSink> Timeline<S> {
    /// A flow id of its own: one made of the file, stream and correlation numbers would be shared by files or
    /// streams that agree in the bits kept, and by a correlation id used again.
    fn new_flow(&mut self) -> u64 {
        self.flows_drawn += 1;
        self.flows_drawn
    }

    /// A launch or copy call of `correlation`: written with the flow to its work if that came first, else held.
    pub(super) fn call(&mut self, key: (u32, u32), correlation: u32, call: Held) -> io::Result<()> {
        let s = self.streams.entry(key).or_default();
        match s.waiting.remove(&correlation) {
            Some(Waiting::Work(work)) => {
                s.held -= work.len();
                remember(&mut s.paired, correlation);
                let id = self.new_flow();
                self.sink.slice(&call.slice(Some(id), None))?;
                for (i, w) in work.iter().enumerate() {
                    self.sink.slice(&w.slice(None, (i == 0).then_some(id)))?;
                }
                Ok(())
            }
            Some(Waiting::Call(earlier)) => {
                // The same id twice: the earlier call will get no work.
                s.held -= 1;
                self.sink.slice(&earlier.slice(None, None))?;
                self.hold(key, correlation, Waiting::Call(call))
            }
            None => self.hold(key, correlation, Waiting::Call(call)),
        }
    }

    /// Device work of `correlation`: written with the flow from its call if that came first, else held.
    pub(super) fn work(&mut self, key: (u32, u32), correlation: u32, work: Held) -> io::Result<()> {
        if correlation == 0 {
            return self.sink.slice(&work.slice(None, None));
        }
        let s = self.streams.entry(key).or_default();
        match s.waiting.remove(&correlation) {
            Some(Waiting::Call(call)) => {
                s.held -= 1;
                remember(&mut s.paired, correlation);
                let id = self.new_flow();
                self.sink.slice(&call.slice(Some(id), None))?;
                self.sink.slice(&work.slice(None, Some(id)))
            }
            Some(Waiting::Work(mut earlier)) => {
                s.held -= earlier.len();
                earlier.push(work);
                self.hold(key, correlation, Waiting::Work(earlier))
            }
            // More work of a call whose flow is drawn (the kernels of a graph's nodes).
            None if s.paired.contains(&correlation) => self.sink.slice(&work.slice(None, None)),
            None => self.hold(key, correlation, Waiting::Work(vec![work])),
        }
    }

    /// Holds `waiting` until its other side comes; past the bound, the oldest held slices are written without a
    /// flow.
    fn hold(&mut self, key: (u32, u32), correlation: u32, waiting: Waiting) -> io::Result<()> {
        let s = self.streams.entry(key).or_default();
        s.held += waiting.len();
        s.waiting.insert(correlation, waiting);
        while s.held > MAX_OPEN {
            let Some((_, oldest)) = s.waiting.pop_first() else {
                break;
            };
            s.held -= oldest.len();
            write_unpaired(&mut self.sink, oldest)?;
        }
        Ok(())
    }

    /// Writes, without flows, every slice stream `key` holds.
    pub(super) fn release(&mut self, key: (u32, u32)) -> io::Result<()> {
        let Some(s) = self.streams.get_mut(&key) else {
            return Ok(());
        };
        let waiting = std::mem::take(&mut s.waiting);
        s.held = 0;
        s.paired.clear();
        for w in waiting.into_values() {
            write_unpaired(&mut self.sink, w)?;
        }
        Ok(())
    }
}
