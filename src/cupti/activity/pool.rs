//! The crate-owned pool of activity buffers CUPTI fills.
//!
//! CUPTI asks for a buffer from any thread (the buffer-requested callback) and gives it back filled (the
//! buffer-completed callback), possibly after the tracer that lent it has stopped. The pool is therefore
//! process-wide and never frees a buffer CUPTI still holds: a buffer lent out stays allocated until it comes back.
//! Up to `max` buffers are lent at once; past that a request is refused and CUPTI drops records, which it counts
//! (`cuptiActivityGetNumDroppedRecords`).

use std::sync::Mutex;

/// One buffer: 8-byte aligned, as CUPTI requires.
struct Block(Box<[u64]>);

impl Block {
    fn addr(&self) -> usize {
        self.0.as_ptr() as usize
    }

    fn len_bytes(&self) -> usize {
        self.0.len() * 8
    }
}

struct State {
    /// Bytes per buffer handed out now; 0 while no tracer runs (requests are refused).
    size: usize,
    max: usize,
    free: Vec<Block>,
    /// Buffers CUPTI holds, each with the generation (the configuration) it was lent in.
    lent: Vec<(Block, u64)>,
    /// Bumped at each [`configure`]: a buffer an earlier tracer lent, which CUPTI completed to another consumer that
    /// kept it, is not the current tracer's.
    generation: u64,
    /// Buffers being allocated outside the lock, counted against `max`.
    pending: usize,
    made: u64,
    refused: u64,
}

static POOL: Mutex<State> = Mutex::new(State {
    size: 0,
    max: 0,
    free: Vec::new(),
    lent: Vec::new(),
    generation: 0,
    pending: 0,
    made: 0,
    refused: 0,
});

impl State {
    /// Buffers lent since the current configuration.
    fn lent_now(&self) -> usize {
        self.lent
            .iter()
            .filter(|&&(_, g)| g == self.generation)
            .count()
    }
}

fn pool() -> std::sync::MutexGuard<'static, State> {
    // The state stays consistent across a panic (every change is one push or pop).
    POOL.lock().unwrap_or_else(|p| p.into_inner())
}

/// Counters of the pool since the current tracer configured it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct PoolCounts {
    pub made: u64,
    pub refused: u64,
    /// Lent since the current tracer configured the pool and not back yet.
    pub lent: usize,
}

/// Serves buffers of `size` bytes (a multiple of 8), at most `max` lent at once. Free buffers of another size
/// are released; lent ones are kept until they come back.
pub(crate) fn configure(size: usize, max: usize) {
    let mut p = pool();
    p.size = size;
    p.max = max;
    p.free.retain(|b| b.len_bytes() == size);
    p.generation += 1;
    p.made = 0;
    p.refused = 0;
}

/// Stops serving buffers and releases the free ones; lent ones are kept until they come back.
pub(crate) fn close() {
    let mut p = pool();
    p.size = 0;
    p.max = 0;
    p.free.clear();
}

/// Tests only: what runs while a buffer is allocated outside the lock.
#[cfg(test)]
pub(super) static BETWEEN: Mutex<Option<fn()>> = Mutex::new(None);

/// A buffer for CUPTI: its address and size, or `None` when the pool is closed or `max` are lent.
pub(crate) fn take() -> Option<(*mut u8, usize)> {
    let mut p = pool();
    if p.size == 0 || p.lent_now() + p.pending >= p.max {
        p.refused += 1;
        return None;
    }
    let block = match p.free.pop() {
        Some(b) => b,
        None => {
            // Zeroing megabytes takes a while: not under the lock other requesting threads wait on.
            let size = p.size;
            p.pending += 1;
            p.made += 1;
            drop(p);
            let block = Block(vec![0u64; size / 8].into_boxed_slice());
            #[cfg(test)]
            if let Some(between) = *BETWEEN.lock().unwrap_or_else(|e| e.into_inner()) {
                between();
            }
            p = pool();
            p.pending -= 1;
            // The pool closed (or took another size) meanwhile: the tracer that asked has stopped, and a buffer
            // lent now would outlive its last flush, to be completed to whoever registers next.
            if p.size != size {
                p.refused += 1;
                return None;
            }
            block
        }
    };
    let ptr = block.0.as_ptr().cast::<u8>().cast_mut();
    let len = block.len_bytes();
    let generation = p.generation;
    p.lent.push((block, generation));
    Some((ptr, len))
}

/// The size of the lent buffer at `ptr`, `None` if the pool did not lend it.
pub(crate) fn lent_size(ptr: *const u8) -> Option<usize> {
    let p = pool();
    p.lent
        .iter()
        .find(|(b, _)| b.addr() == ptr as usize)
        .map(|(b, _)| b.len_bytes())
}

/// Takes back the buffer at `ptr`: it is reused if it has the current size, released otherwise. Returns false
/// for a pointer the pool did not lend (left alone).
pub(crate) fn give_back(ptr: *const u8) -> bool {
    let mut p = pool();
    let Some(i) = p.lent.iter().position(|(b, _)| b.addr() == ptr as usize) else {
        return false;
    };
    let (block, _) = p.lent.swap_remove(i);
    if block.len_bytes() == p.size {
        p.free.push(block);
    }
    true
}

pub(crate) fn counts() -> PoolCounts {
    let p = pool();
    PoolCounts {
        made: p.made,
        refused: p.refused,
        lent: p.lent_now(),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// The pool is the process's: one test at a time.
    pub(in super::super) static SERIAL: Mutex<()> = Mutex::new(());

    #[test]
    fn a_buffer_made_while_the_pool_closes_is_not_lent() {
        let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        configure(64, 4);
        // The tracer stops (its pool closes) while CUPTI's request allocates outside the lock.
        *BETWEEN.lock().unwrap() = Some(close);
        let got = take();
        *BETWEEN.lock().unwrap() = None;
        assert!(got.is_none(), "a buffer lent after the pool closed");
        assert_eq!(counts().lent, 0);
        // Open again, a request is served.
        configure(64, 4);
        let (ptr, len) = take().expect("served");
        assert_eq!(len, 64);
        assert!(give_back(ptr));
        close();
    }

    #[test]
    fn a_buffer_an_earlier_tracer_lent_is_not_counted_as_the_current_ones() {
        let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        configure(64, 1);
        let (kept, _) = take().expect("served");
        // Never given back (CUPTI completed it to a consumer that kept it), and the next tracer configures.
        configure(64, 1);
        assert_eq!(counts().lent, 0, "not the current tracer's");
        let (ptr, _) = take().expect("served: the earlier buffer is not counted against the limit");
        assert_eq!(counts().lent, 1);
        assert!(give_back(ptr));
        assert!(give_back(kept), "still known, and taken back");
        assert_eq!(counts().lent, 0);
        close();
    }
}
