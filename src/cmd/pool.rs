//! An ordered parallel map over a stream: items are read on the calling thread, processed on
//! worker threads, and their results handed back on the calling thread in the order the items
//! were read, each as soon as every earlier one has been.
//!
//! What it promises, each with a unit test below:
//! - **Order**: results come out in input order, whatever the number of threads.
//! - **Bounded memory**: at most a few batches per worker are between reading and emitting, so a
//!   stream of any length is read as fast as it is processed, never ahead of it.
//! - **Latency**: before reading could wait for input (the source is not [`Source::ready`]),
//!   every result owed is emitted first, so that a document that arrives alone on a pipe (an
//!   agent sending one conversation and waiting for the answer) is answered at once.
//! - **Feedback**: the emitter gets the source, so what it sees can change what is read next (a
//!   syntax error ends its input at the same document whatever the number of threads).
//! - **Early stop**: an emitter error stops reading, processing and emitting, and is returned.
//!
//! It knows nothing of documents, stdout or exit codes: those are the caller's.
//!
//! Why hand-written: rayon's ordered parallel iterators (`par_iter().map().collect()`) need the
//! whole input first, and `par_bridge` streams but gives up the order, so neither can answer a
//! lone document on a pipe before the next arrives, nor stream in bounded memory. Ordered
//! streaming on top of a crate would still need the reordering below; crossbeam's channels
//! would only replace the `Mutex<Receiver>` the workers share, which is taken once per batch
//! of up to [`BATCH_ITEMS`] items (std's channels are crossbeam's design since Rust 1.67).
//! Neither would make counting a stream faster, so ctx keeps this module and no
//! dependency.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, channel, sync_channel};

/// The most worker threads `-j` starts. Counting and the other local commands are CPU-bound,
/// so more threads than cores only cost memory; 64 also bounds how many summarizer requests
/// are in flight at once.
pub const MAX_JOBS: usize = 64;

/// The most items a batch holds. Items go to the workers in batches: a wake-up per item costs
/// more than counting a small document.
pub const BATCH_ITEMS: usize = 64;

/// A batch is sent once its items hold this many bytes ([`Source::size`]).
pub const BATCH_BYTES: usize = 1 << 18;

/// Batches in flight (sent and not yet emitted) per worker thread.
const BATCHES_PER_THREAD: usize = 4;

/// The number of worker threads for `-j`: the number of CPUs by default and for `-j 0`, never
/// more than [`MAX_JOBS`].
pub fn worker_threads(jobs: Option<usize>) -> usize {
    match jobs {
        None | Some(0) => std::thread::available_parallelism().map_or(1, usize::from),
        Some(n) => n,
    }
    .min(MAX_JOBS)
}

/// A stream of items read on the calling thread.
pub trait Source {
    type Item: Send;

    /// The next item, `None` at the end. May wait for input.
    fn next_item(&mut self) -> Option<Self::Item>;

    /// True only when [`Source::next_item`] can answer without waiting for input (some of the
    /// next item is already read); false when it may wait. Before asking a source that is not
    /// ready, every result owed is emitted.
    fn ready(&self) -> bool;

    /// The bytes an item holds, to bound the size of a batch.
    fn size(item: &Self::Item) -> usize;
}

/// Maps `work` over every item of `source` on `threads` threads (`1`: on this thread, item by
/// item) and hands each result to `emit`, in the source's order, on this thread. `emit` also
/// gets the source, to end part of it. When `emit` returns an error, nothing more is read or
/// emitted, the workers stop after their current item, and the error is returned.
pub fn ordered_map<S, R, E>(
    source: &mut S,
    threads: usize,
    work: impl Fn(S::Item) -> R + Sync,
    mut emit: impl FnMut(&mut S, R) -> Result<(), E>,
) -> Result<(), E>
where
    S: Source,
    R: Send,
{
    if threads <= 1 {
        while let Some(item) = source.next_item() {
            emit(source, work(item))?;
        }
        return Ok(());
    }
    let in_flight = BATCHES_PER_THREAD * threads;
    let (job_tx, job_rx) = sync_channel::<Vec<(usize, S::Item)>>(in_flight);
    let job_rx = Mutex::new(job_rx);
    let (done_tx, done_rx) = channel::<(usize, R)>();
    let (work, job_rx) = (&work, &job_rx);
    // `move`: on an early return the sender goes with the closure, so idle workers see the end
    // of the jobs and the scope can join them.
    std::thread::scope(move |scope| {
        for _ in 0..threads {
            let done_tx = done_tx.clone();
            scope.spawn(move || {
                loop {
                    let batch = job_rx
                        .lock()
                        .map_err(|_| ())
                        .and_then(|rx| rx.recv().map_err(|_| ()));
                    let Ok(batch) = batch else {
                        break;
                    };
                    for (seq, item) in batch {
                        if done_tx.send((seq, work(item))).is_err() {
                            return; // the caller stopped
                        }
                    }
                }
            });
        }
        drop(done_tx);
        let mut order = InOrder {
            done: done_rx,
            pending: BTreeMap::new(),
            next: 0,
            batch_ends: VecDeque::new(),
        };
        let mut batch: Vec<(usize, S::Item)> = Vec::new();
        let mut batch_bytes = 0usize;
        let mut seq = 0usize;
        loop {
            // A batch goes when it is big enough, when the input is over, or when the next item
            // is not read yet (it may be slow to come).
            if batch.is_empty() && !source.ready() {
                // Reading may now wait for input that is slow to come: first emit every result
                // still owed.
                while order.next < seq {
                    if !order.settle(true, source, &mut emit)? {
                        break;
                    }
                }
            }
            let tried = batch.is_empty() || source.ready();
            let item = if tried { source.next_item() } else { None };
            let done_reading = tried && item.is_none();
            if let Some(item) = item {
                batch_bytes += S::size(&item);
                batch.push((seq, item));
                seq += 1;
                if batch.len() < BATCH_ITEMS && batch_bytes < BATCH_BYTES {
                    continue;
                }
            }
            if !batch.is_empty() {
                while order.batch_ends.len() >= in_flight {
                    if !order.settle(true, source, &mut emit)? {
                        break;
                    }
                }
                order.batch_ends.push_back(seq);
                batch_bytes = 0;
                if job_tx.send(std::mem::take(&mut batch)).is_err() {
                    break;
                }
            }
            order.settle(false, source, &mut emit)?;
            if done_reading {
                break;
            }
        }
        drop(job_tx);
        while order.settle(true, source, &mut emit)? {}
        Ok(())
    })
}

/// Puts the workers' results back in order.
struct InOrder<R> {
    done: Receiver<(usize, R)>,
    /// Results that came before an earlier one.
    pending: BTreeMap<usize, R>,
    /// The number of the next result to emit.
    next: usize,
    /// The end (last number + 1) of every batch sent and not yet fully emitted.
    batch_ends: VecDeque<usize>,
}

impl<R> InOrder<R> {
    /// Takes the finished results (first waiting for one if `wait`), emits every one that is
    /// next in order, and forgets the batches fully emitted. `Ok(false)`: no result can come.
    fn settle<S, E>(
        &mut self,
        wait: bool,
        source: &mut S,
        emit: &mut impl FnMut(&mut S, R) -> Result<(), E>,
    ) -> Result<bool, E> {
        let mut open = true;
        if wait {
            match self.done.recv() {
                Ok((seq, r)) => {
                    self.pending.insert(seq, r);
                }
                Err(_) => open = false,
            }
        }
        while let Ok((seq, r)) = self.done.try_recv() {
            self.pending.insert(seq, r);
        }
        while let Some(r) = self.pending.remove(&self.next) {
            emit(source, r)?;
            self.next += 1;
        }
        while self.batch_ends.front().is_some_and(|&end| self.next >= end) {
            self.batch_ends.pop_front();
        }
        Ok(open)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Numbers `0..len`, grouped into inputs of `per_input` items; an item is ready unless it
    /// starts a new "message" of `message` items (where a pipe would make the reader wait).
    struct Numbers {
        len: usize,
        read: usize,
        emitted: usize,
        /// The most items read and not yet emitted at any time.
        most_ahead: usize,
        message: usize,
        per_input: usize,
        /// Inputs ended by the emitter: their remaining items are skipped.
        ended: Vec<usize>,
    }

    impl Numbers {
        fn new(len: usize) -> Numbers {
            Numbers {
                len,
                read: 0,
                emitted: 0,
                most_ahead: 0,
                message: usize::MAX,
                per_input: usize::MAX,
                ended: Vec::new(),
            }
        }
    }

    impl Source for Numbers {
        type Item = usize;

        fn next_item(&mut self) -> Option<usize> {
            while self.read < self.len && self.ended.contains(&(self.read / self.per_input)) {
                self.read += 1;
            }
            if self.read == self.len {
                return None;
            }
            if self.read % self.message == 0 {
                // Waiting here for the next message would wait forever if the answer to the
                // last one is still owed.
                assert_eq!(
                    self.emitted, self.read,
                    "asked for more input before answering"
                );
            }
            self.read += 1;
            self.most_ahead = self.most_ahead.max(self.read - self.emitted);
            Some(self.read - 1)
        }

        fn ready(&self) -> bool {
            self.read == self.len || self.read % self.message != 0
        }

        fn size(_: &usize) -> usize {
            8
        }
    }

    /// A little uneven work, so that results finish out of order.
    fn work(n: usize) -> usize {
        let mut x = n as u64;
        for _ in 0..(n * 7919 % 500) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        n * 2
    }

    #[test]
    fn results_come_out_in_input_order() {
        for threads in [1, 2, 3, 8] {
            let mut src = Numbers::new(5000);
            let mut out = Vec::new();
            let r: Result<(), ()> = ordered_map(&mut src, threads, work, |s, r| {
                s.emitted += 1;
                out.push(r);
                Ok(())
            });
            assert!(r.is_ok());
            assert_eq!(
                out,
                (0..5000).map(|n| n * 2).collect::<Vec<_>>(),
                "{threads}"
            );
        }
    }

    /// However long the stream and however slow one item, the reader never gets more than the
    /// batches in flight ahead of the writer.
    #[test]
    fn memory_stays_bounded_however_long_the_stream() {
        for threads in [1, 2, 4] {
            let mut src = Numbers::new(200_000);
            let slow_first = |n: usize| {
                if n == 0 {
                    std::thread::sleep(std::time::Duration::from_millis(30));
                }
                n
            };
            let r: Result<(), ()> = ordered_map(&mut src, threads, slow_first, |s, _| {
                s.emitted += 1;
                Ok(())
            });
            assert!(r.is_ok());
            assert_eq!(src.emitted, 200_000);
            let bound = (BATCHES_PER_THREAD * threads + 1) * BATCH_ITEMS;
            assert!(src.most_ahead <= bound, "{threads}: {}", src.most_ahead);
        }
    }

    /// A source that would wait for input is only read once every result is out: a document
    /// that came alone is answered before the next is waited for.
    #[test]
    fn a_lone_item_is_answered_before_more_input_is_awaited() {
        for threads in [1, 2, 4] {
            for message in [1, 3, 100] {
                let mut src = Numbers::new(600);
                src.message = message;
                let r: Result<(), ()> = ordered_map(&mut src, threads, work, |s, _| {
                    s.emitted += 1;
                    Ok(())
                });
                assert!(r.is_ok());
                assert_eq!(src.emitted, 600);
            }
        }
    }

    /// An emitter error stops the run: nothing after it is emitted, the stream is not read to
    /// its end, and the error comes back.
    #[test]
    fn an_emitter_error_stops_the_run() {
        for threads in [1, 2, 8] {
            let mut src = Numbers::new(10_000_000);
            let mut out = Vec::new();
            let r = ordered_map(&mut src, threads, work, |s, r| {
                s.emitted += 1;
                if r == 20 {
                    return Err("stop");
                }
                out.push(r);
                Ok(())
            });
            assert_eq!(r, Err("stop"));
            assert_eq!(out, (0..10).map(|n| n * 2).collect::<Vec<_>>());
            assert!(src.read < 100_000, "{threads}: read {}", src.read);
        }
    }

    /// The emitter can end an input (a syntax error); the same items come out whatever the
    /// number of threads, though more may have been read ahead.
    #[test]
    fn ending_an_input_gives_the_same_output_for_any_thread_count() {
        let run = |threads: usize| {
            let mut src = Numbers::new(3000);
            src.per_input = 1000;
            let mut out = Vec::new();
            let r: Result<(), ()> = ordered_map(
                &mut src,
                threads,
                |n| n,
                |s, n| {
                    let input = n / s.per_input;
                    if s.ended.contains(&input) {
                        return Ok(()); // read ahead before the error was seen
                    }
                    out.push(n);
                    if n % 1000 == 137 && input < 2 {
                        s.ended.push(input); // the "syntax error"
                    }
                    Ok(())
                },
            );
            assert!(r.is_ok());
            out
        };
        let one = run(1);
        let expected: Vec<usize> = (0..=137).chain(1000..=1137).chain(2000..3000).collect();
        assert_eq!(one, expected);
        for threads in [2, 3, 8] {
            assert_eq!(run(threads), one, "{threads}");
        }
    }

    #[test]
    fn jobs_are_capped() {
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        assert_eq!(worker_threads(None), cpus.min(MAX_JOBS));
        assert_eq!(worker_threads(Some(0)), cpus.min(MAX_JOBS));
        assert_eq!(worker_threads(Some(1)), 1);
        assert_eq!(worker_threads(Some(3)), 3);
        assert_eq!(worker_threads(Some(5000)), MAX_JOBS);
        assert_eq!(worker_threads(Some(usize::MAX)), MAX_JOBS);
    }
}
