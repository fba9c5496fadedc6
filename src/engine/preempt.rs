//! A statement that is stopped (a `serve` client's cancel, a time limit, a client gone) stops its
//! work at once, and one heavy join never holds a worker thread for long.
//!
//! A statement is stopped by aborting the tasks that pull its batches (DataFusion's own tasks are
//! aborted when their consumers drop), and a task stops only where it yields. DataFusion's
//! operators yield when an input has nothing ready, and its leaves spend tokio's cooperative
//! budget (128 batches a poll). That bounds a linear operator, not a join: a nested-loop join
//! joins each probe batch with its whole build side in one poll, and polls its probe input again
//! without returning while nothing matches. With two million build rows one poll is 1.6 x 10^10
//! pairs, seconds of one core; a cancelled statement ran on for that long, and a worker busy so
//! ran no timers, no I/O and no other client's statement meanwhile.
//!
//! So the inputs of every operator with two or more inputs (the joins) are read through
//! [`Preemptible`], which hands its consumer a batch in slices sized so that the consumer's work
//! on one slice is about `SLICE_WORK` (measured: the time from handing a slice to being asked
//! for the next), and answers "not yet, poll again" once `SLICE` has passed since its task last
//! yielded. A join that is cheap per row gets whole batches after a few slices; a nested-loop
//! join with a huge build side gets a few rows at a time, and its task yields every `SLICE`.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::error::Result;
use datafusion::execution::{RecordBatchStream, SendableRecordBatchStream, TaskContext};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::{ChildrenPropertiesMode, DisplayAs, DisplayFormatType, ExecutionPlan, PhysicalExpr, PlanProperties, ReplaceChildrenOptions};
use futures::{Stream, StreamExt};

/// The longest a join's task works between two yields, give or take one slice's work.
const SLICE: Duration = Duration::from_millis(20);

/// The consumer's work on one slice that the slices are sized for: a slice that took longer
/// halves the next, one that took under a quarter of it doubles the next.
const SLICE_WORK: Duration = Duration::from_millis(8);

/// The first slice's rows (a slice grows to a whole batch in a few doublings where the
/// consumer is quick), and the most a slice grows to (a consumer that turns slow is back to
/// small slices in a few halvings).
const FIRST_SLICE_ROWS: usize = 8;
const MAX_SLICE_ROWS: usize = 1 << 16;

const NAME: &str = "PreemptibleExec";

/// The physical optimizer rule that reads the inputs of every operator with two or more inputs
/// through [`Preemptible`]. It runs last, after the plan's shape is settled.
#[derive(Debug, Default)]
pub(super) struct PreemptibleJoins;

impl PhysicalOptimizerRule for PreemptibleJoins {
    fn optimize(&self, plan: Arc<dyn ExecutionPlan>, _config: &ConfigOptions) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            if node.children().len() < 2 || node.children().iter().all(|c| c.name() == NAME) {
                return Ok(Transformed::no(node));
            }
            let inputs = node
                .children()
                .into_iter()
                .map(|c| if c.name() == NAME { Arc::clone(c) } else { Arc::new(Preemptible { input: Arc::clone(c) }) as Arc<dyn ExecutionPlan> })
                .collect();
            // The inputs' properties are the wrapped ones': nothing to recompute.
            Ok(Transformed::new(node.replace_children(inputs, ReplaceChildrenOptions::new(ChildrenPropertiesMode::Keep))?, true, TreeNodeRecursion::Continue))
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "preemptible_joins"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// Its input's rows, unchanged and in order, in slices its consumer works on for about
/// `SLICE_WORK` each; its reader yields at least every `SLICE`.
#[derive(Debug, Clone)]
pub(super) struct Preemptible {
    input: Arc<dyn ExecutionPlan>,
}

impl DisplayAs for Preemptible {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{NAME}")
    }
}

impl ExecutionPlan for Preemptible {
    fn name(&self) -> &str {
        NAME
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.input.properties()
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(&self, _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn replace_children(self: Arc<Self>, mut children: Vec<Arc<dyn ExecutionPlan>>, _options: ReplaceChildrenOptions) -> Result<Arc<dyn ExecutionPlan>> {
        if children.len() != 1 {
            return Err(datafusion::error::DataFusionError::Internal(format!("{NAME} takes one input, not {}", children.len())));
        }
        Ok(Arc::new(Preemptible { input: children.swap_remove(0) }))
    }

    #[allow(deprecated)]
    fn with_new_children(self: Arc<Self>, children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        self.replace_children(children, ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute))
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let input = self.input.execute(partition, context)?;
        Ok(Box::pin(PreemptibleStream { input, since: Instant::now(), batch: None, slice_rows: FIRST_SLICE_ROWS, handed: None }))
    }
}

/// The input's batches in slices; "pending" (the task woken at once) when `SLICE` has passed
/// since the stream last answered pending or its input did.
struct PreemptibleStream {
    input: SendableRecordBatchStream,
    since: Instant,
    /// The batch being handed out, and how many of its rows were.
    batch: Option<(RecordBatch, usize)>,
    slice_rows: usize,
    /// When the last slice was handed out.
    handed: Option<Instant>,
}

impl PreemptibleStream {
    /// The next slice of the current batch, if rows are left.
    fn next_slice(&mut self) -> Option<RecordBatch> {
        let (batch, done) = self.batch.as_mut()?;
        let rows = self.slice_rows.min(batch.num_rows() - *done);
        if rows == 0 {
            self.batch = None;
            return None;
        }
        let slice = if rows == batch.num_rows() { batch.clone() } else { batch.slice(*done, rows) };
        *done += rows;
        self.handed = Some(Instant::now());
        Some(slice)
    }
}

impl Stream for PreemptibleStream {
    type Item = Result<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Some(handed) = self.handed.take() {
            let took = handed.elapsed();
            if took > SLICE_WORK {
                self.slice_rows = (self.slice_rows / 2).max(1);
            } else if took < SLICE_WORK / 4 {
                self.slice_rows = (self.slice_rows * 2).min(MAX_SLICE_ROWS);
            }
        }
        if self.since.elapsed() >= SLICE {
            self.since = Instant::now();
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        loop {
            if let Some(slice) = self.next_slice() {
                return Poll::Ready(Some(Ok(slice)));
            }
            match self.input.poll_next_unpin(cx) {
                Poll::Ready(Some(Ok(batch))) => self.batch = Some((batch, 0)),
                Poll::Pending => {
                    // The task yields anyway.
                    self.since = Instant::now();
                    return Poll::Pending;
                }
                other => return other,
            }
        }
    }
}

impl RecordBatchStream for PreemptibleStream {
    fn schema(&self) -> SchemaRef {
        self.input.schema()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::SessionContext;

    fn session() -> SessionContext {
        let state = datafusion::execution::session_state::SessionStateBuilder::new()
            .with_default_features()
            .with_physical_optimizer_rule(Arc::new(PreemptibleJoins))
            .build();
        SessionContext::new_with_state(state)
    }

    /// Every input of a join is read through the wrapper, once; the answer is the same.
    #[tokio::test]
    async fn a_join_reads_its_inputs_through_the_wrapper() {
        let sql = "SELECT count(*), sum(a.value * b.value) FROM generate_series(1, 20000) a, generate_series(1, 300) b WHERE a.value + b.value <= 700";
        let df = session().sql(sql).await.unwrap();
        let plan = df.clone().create_physical_plan().await.unwrap();
        let shown = datafusion::physical_plan::displayable(plan.as_ref()).indent(false).to_string();
        assert_eq!(shown.matches(NAME).count(), 2, "{shown}");
        assert!(!shown.contains("PreemptibleExec\n  PreemptibleExec"), "{shown}");
        let batches = df.collect().await.unwrap();
        let value = |i: usize| batches[0].column(i).as_any().downcast_ref::<datafusion::arrow::array::Int64Array>().unwrap().value(0);
        // Pairs with a + b <= 700: for b in 1..=300, a in 1..=700-b.
        let (count, sum): (i64, i64) = (1..=300i64).map(|b| (700 - b, b * (700 - b) * (701 - b) / 2)).fold((0, 0), |(c, s), (n, x)| (c + n, s + x));
        assert_eq!((value(0), value(1)), (count, sum));
    }

    /// A nested-loop join whose every probe batch meets two million build rows (1.6 x 10^10
    /// pairs, seconds of a core in one poll without the slices) stops within a slice when its
    /// task is aborted (a worker beside the two partitions', as `serve` has, keeps the timers).
    #[test]
    fn a_heavy_join_stops_when_aborted() {
        const WORKER: &str = "preempt-test";
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(3).thread_name(WORKER).enable_all().build().unwrap();
        runtime.block_on(a_heavy_join_aborted(WORKER));
    }

    async fn a_heavy_join_aborted(worker: &str) {
        let sql = "SELECT count(*) FROM generate_series(1, 2000000) a, generate_series(1, 100000000) b WHERE a.value + b.value = 7";
        let ctx = session();
        let df = ctx.sql(sql).await.unwrap();
        let running = tokio::spawn(df.collect());
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(!running.is_finished(), "the join is still at work");
        // The CPU ticks of this runtime's workers (the other tests run beside it).
        let cpu = || -> u64 {
            std::fs::read_dir("/proc/self/task")
                .unwrap()
                .filter_map(|t| {
                    let t = t.ok()?.path();
                    (std::fs::read_to_string(t.join("comm")).ok()?.trim() == worker).then_some(())?;
                    let stat = std::fs::read_to_string(t.join("stat")).ok()?;
                    Some(stat.rsplit(')').next()?.split_whitespace().skip(11).take(2).map(|v| v.parse::<u64>().unwrap()).sum::<u64>())
                })
                .sum()
        };
        assert!(cpu() > 0, "the workers are found and at work");
        running.abort();
        assert!(running.await.unwrap_err().is_cancelled());
        tokio::time::sleep(Duration::from_millis(200)).await;
        let before = cpu();
        tokio::time::sleep(Duration::from_millis(1000)).await;
        let ticks = cpu() - before;
        assert!(ticks <= 10, "the aborted join still used {ticks} ticks of CPU in the second after");
    }
}
