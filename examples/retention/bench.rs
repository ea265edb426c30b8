//! Running the retention benchmark: each method at each budget level on each trajectory, and
//! what survived. Shared by `examples/retention` and `tests/suite/retention.rs`.
#![allow(dead_code, clippy::print_stdout)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::facts::{self, Category, annotate, drop_oldest, must_keep, retained};
use serde_json::Value;

/// The trajectories measured when no file is named (tests/corpus/README.md lists them).
pub const DEFAULT_SET: &str = "bench/retention_set.txt";

/// A way of shrinking a trajectory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Method {
    /// Drop the oldest messages until the rest fits.
    Naive,
    /// `ctx fit`.
    Fit,
    /// `ctx fit --summarize=extractive`.
    FitSummarize,
}

impl Method {
    pub const ALL: [Method; 3] = [Method::Naive, Method::Fit, Method::FitSummarize];

    pub fn name(self) -> &'static str {
        match self {
            Method::Naive => "naive",
            Method::Fit => "fit",
            Method::FitSummarize => "fit+summarize",
        }
    }
}

/// One budget level of the benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Half,
    Quarter,
    Tenth,
    Fixed8k,
}

impl Level {
    pub const ALL: [Level; 4] = [Level::Half, Level::Quarter, Level::Tenth, Level::Fixed8k];

    pub fn name(self) -> &'static str {
        match self {
            Level::Half => "50%",
            Level::Quarter => "25%",
            Level::Tenth => "10%",
            Level::Fixed8k => "8000",
        }
    }

    pub fn budget(self, tokens: usize) -> Option<usize> {
        match self {
            Level::Half => Some(tokens / 2),
            Level::Quarter => Some(tokens / 4),
            Level::Tenth => Some(tokens / 10),
            Level::Fixed8k => (tokens > 8000).then_some(8000),
        }
    }
}

#[derive(Default, Clone)]
pub struct Tally {
    /// Feasible runs: the budget holds what ctx must keep (pinned messages, newest unit).
    pub runs: usize,
    /// Runs whose budget is below what ctx must keep (not in the figures below).
    pub infeasible: usize,
    /// Feasible runs that ended with exit 3 (counted as retaining nothing).
    pub exit3: usize,
    pub facts: BTreeMap<Category, (usize, usize)>,
    pub task: (usize, usize),
    pub newest: (usize, usize),
    pub utilization: Vec<f64>,
    /// The summary-only measure, over the runs that summarized: of the facts read from the
    /// summarized messages, (present in the summary, all), by category.
    pub summary: BTreeMap<Category, (usize, usize)>,
    /// Runs whose output holds a summary.
    pub summarized: usize,
    /// The summary's share of the budget, per run that summarized (%).
    pub summary_share: Vec<f64>,
}

impl Tally {
    /// Mean utilization (tokens after / budget, %) of the runs with an output.
    pub fn utilization(&self) -> f64 {
        self.utilization.iter().sum::<f64>() / self.utilization.len().max(1) as f64
    }

    /// Adds `other`'s runs to this one.
    pub fn add(&mut self, other: &Tally) {
        self.runs += other.runs;
        self.infeasible += other.infeasible;
        self.exit3 += other.exit3;
        for (c, (k, n)) in &other.facts {
            let e = self.facts.entry(*c).or_default();
            e.0 += k;
            e.1 += n;
        }
        self.task.0 += other.task.0;
        self.task.1 += other.task.1;
        self.newest.0 += other.newest.0;
        self.newest.1 += other.newest.1;
        self.utilization.extend(&other.utilization);
        for (c, (k, n)) in &other.summary {
            let e = self.summary.entry(*c).or_default();
            e.0 += k;
            e.1 += n;
        }
        self.summarized += other.summarized;
        self.summary_share.extend(&other.summary_share);
    }

    /// Facts retained: the mean of the categories' shares, so that a trajectory with forty
    /// test lines does not outweigh its task.
    pub fn retention(&self) -> f64 {
        let shares: Vec<f64> = self
            .facts
            .values()
            .filter(|(_, n)| *n > 0)
            .map(|&(k, n)| pct(k, n))
            .collect();
        if shares.is_empty() {
            100.0
        } else {
            shares.iter().sum::<f64>() / shares.len() as f64
        }
    }
}

pub fn pct(k: usize, n: usize) -> f64 {
    if n == 0 {
        100.0
    } else {
        100.0 * k as f64 / n as f64
    }
}

pub fn count(ctx: &Path, doc: &Value) -> usize {
    let mut child = Command::new(ctx)
        .args(["count", "--output", "total"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("ctx runs");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("piped");
        stdin
            .write_all(&serde_json::to_vec(doc).expect("JSON"))
            .expect("ctx reads");
    }
    let out = child.wait_with_output().expect("ctx runs");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("a count")
}

/// What `ctx fit` wrote: the output, and the input indices its summarize stage summarized.
pub struct FitRun {
    pub output: Value,
    pub summarized: Vec<usize>,
}

/// Runs `ctx fit` at `budget`; `None` when it exits 3.
pub fn fit(ctx: &Path, file: &Path, budget: usize, summarize: bool) -> Option<FitRun> {
    let mut cmd = Command::new(ctx);
    cmd.args([
        "fit",
        "-q",
        "--report",
        "-",
        "--budget",
        &budget.to_string(),
    ]);
    if summarize {
        cmd.arg("--summarize=extractive");
    }
    let out = cmd.arg(file).output().expect("ctx runs");
    match out.status.code() {
        Some(0) => {
            let report: Value = String::from_utf8_lossy(&out.stderr)
                .lines()
                .find_map(|l| serde_json::from_str(l).ok())
                .expect("fit writes its report on stderr");
            let mut summarized: Vec<usize> = report["stages"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|s| s["stage"] == "summarize")
                .flat_map(|s| s["summarized"].as_array().cloned().unwrap_or_default())
                .filter_map(|i| i.as_u64().map(|i| i as usize))
                .collect();
            summarized.sort_unstable();
            Some(FitRun {
                output: serde_json::from_slice(&out.stdout).expect("fit writes JSON"),
                summarized,
            })
        }
        Some(3) => None,
        c => panic!(
            "ctx fit {} --budget {budget}: exit {c:?}: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

/// Runs every method at every level on every file and tallies what survived.
pub fn measure(
    ctx: &Path,
    files: &[PathBuf],
    levels: &[Level],
    methods: &[Method],
) -> BTreeMap<(Level, Method), Tally> {
    let mut tallies: BTreeMap<(Level, Method), Tally> = BTreeMap::new();
    for file in files {
        let text = std::fs::read_to_string(file).expect("readable trajectory");
        let doc: Value = serde_json::from_str(&text).expect("JSON trajectory");
        let ann = annotate(&doc);
        let tokens = count(ctx, &doc);
        let floor = count(ctx, &must_keep(&doc));
        let newest_tokens = ann.newest.as_ref().map(|o| {
            count(
                ctx,
                &serde_json::json!([{"role": "user", "content": o.text}]),
            )
        });
        let mut by_category: BTreeMap<&str, usize> = BTreeMap::new();
        for f in &ann.facts {
            *by_category.entry(f.category.name()).or_default() += 1;
        }
        eprintln!(
            "# {}: {tokens} tokens, must keep {floor}, facts {by_category:?}",
            file.display(),
        );
        if std::env::var_os("RETENTION_FACTS").is_some() {
            for f in &ann.facts {
                let short: String = f.text.chars().take(100).collect();
                eprintln!("#   {}: {short:?}", f.category.name());
            }
        }
        for &level in levels {
            let Some(budget) = level.budget(tokens) else {
                continue;
            };
            for &config in methods {
                if floor > budget {
                    tallies.entry((level, config)).or_default().infeasible += 1;
                    continue;
                }
                let run = match config {
                    Method::Naive => Some(FitRun {
                        output: drop_oldest(&doc, |d| count(ctx, d) <= budget),
                        summarized: Vec::new(),
                    }),
                    Method::Fit => fit(ctx, file, budget, false),
                    Method::FitSummarize => fit(ctx, file, budget, true),
                };
                let t = tallies.entry((level, config)).or_default();
                t.runs += 1;
                let Some(FitRun { output, summarized }) = run else {
                    t.exit3 += 1;
                    for f in &ann.facts {
                        t.facts.entry(f.category).or_default().1 += 1;
                    }
                    continue;
                };
                if let Some(summary) = facts::summary_text(&output) {
                    t.summarized += 1;
                    t.summary_share.push(
                        count(
                            ctx,
                            &serde_json::json!([{"role": "user", "content": summary}]),
                        ) as f64
                            / budget as f64
                            * 100.0,
                    );
                    for f in ann.facts.iter().filter(|f| {
                        f.category != Category::Newest
                            && summarized.binary_search(&f.message).is_ok()
                    }) {
                        let e = t.summary.entry(f.category).or_default();
                        let kept = summary.contains(&f.text);
                        e.0 += usize::from(kept);
                        e.1 += 1;
                        if !kept && std::env::var_os("RETENTION_MISSED").is_some() {
                            let short: String = f.text.chars().take(100).collect();
                            eprintln!(
                                "#   {} at {}: not in the summary: {}: {short:?}",
                                file.display(),
                                level.name(),
                                f.category.name()
                            );
                        }
                    }
                }
                let kept = retained(&ann.facts, &output);
                for (f, k) in ann.facts.iter().zip(&kept) {
                    let e = t.facts.entry(f.category).or_default();
                    e.0 += usize::from(*k);
                    e.1 += 1;
                }
                let text = facts::output_text(&output);
                if let Some(task) = ann.facts.iter().find(|f| f.category == Category::Task) {
                    t.task.1 += 1;
                    t.task.0 += usize::from(text.contains(&task.text));
                }
                if let (Some(o), Some(n)) = (&ann.newest, newest_tokens) {
                    if n <= budget / 2 {
                        t.newest.1 += 1;
                        t.newest.0 += usize::from(text.contains(&o.text));
                    }
                }
                t.utilization
                    .push(count(ctx, &output) as f64 / budget as f64 * 100.0);
            }
        }
    }
    tallies
}

pub fn print_table(tallies: &BTreeMap<(Level, Method), Tally>, files: usize) {
    println!("{files} trajectories; facts retained (%), by budget and method\n");
    print!("| budget | method | runs | infeasible | retained |");
    for c in Category::ALL {
        print!(" {} |", c.name());
    }
    println!(" task kept | newest kept | utilization | exit 3 |");
    print!("|---|---|---|---|---|");
    for _ in Category::ALL {
        print!("---|");
    }
    println!("---|---|---|---|");
    let mut overall: BTreeMap<Method, Tally> = BTreeMap::new();
    for ((level, config), t) in tallies {
        print!(
            "| {} | {} | {} | {} | {:.1} |",
            level.name(),
            config.name(),
            t.runs,
            t.infeasible,
            t.retention()
        );
        for c in Category::ALL {
            let (k, n) = t.facts.get(&c).copied().unwrap_or((0, 0));
            print!(" {:.1} |", pct(k, n));
        }
        let util = t.utilization();
        println!(
            " {:.0}% | {}/{} | {:.1}% | {} |",
            pct(t.task.0, t.task.1),
            t.newest.0,
            t.newest.1,
            util,
            t.exit3
        );
        overall.entry(*config).or_default().add(t);
    }
    println!();
    let by_level = tallies
        .iter()
        .map(|((level, config), t)| (format!("{} at {}", config.name(), level.name()), t));
    let overall_named = overall
        .iter()
        .map(|(config, t)| (config.name().to_string(), t));
    for (name, t) in by_level.chain(overall_named) {
        if t.summarized == 0 {
            continue;
        }
        print!(
            "{name}: summary-only over {} runs that summarized (facts of the summarized messages found in the summary):",
            t.summarized
        );
        let mut all = (0, 0);
        for (c, (k, n)) in &t.summary {
            print!(" {} {k}/{n} ({:.0}%);", c.name(), pct(*k, *n));
            all.0 += k;
            all.1 += n;
        }
        let share = t.summary_share.iter().sum::<f64>() / t.summary_share.len().max(1) as f64;
        println!(
            " all {}/{} ({:.0}%); the summary is {share:.1}% of the budget on average",
            all.0,
            all.1,
            pct(all.0, all.1)
        );
    }
    for (config, t) in &overall {
        let config = config.name();
        let util = t.utilization();
        println!(
            "{config}: {} runs ({} infeasible), retained {:.1}%, task {:.0}%, newest {}/{} ({:.0}%), utilization {:.1}%, exit 3: {}",
            t.runs,
            t.infeasible,
            t.retention(),
            pct(t.task.0, t.task.1),
            t.newest.0,
            t.newest.1,
            pct(t.newest.0, t.newest.1),
            util,
            t.exit3
        );
    }
}
