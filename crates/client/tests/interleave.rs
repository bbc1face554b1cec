//! Property test (field report 004 (c), recommendation T15): random
//! interleavings of tasks, pipelines and immediate commands on one shared
//! client, 10,000 operations per case, every key and value unique: no reply
//! may ever reach the wrong caller.

mod common;

use std::sync::Arc;

use bytes::Bytes;
use proptest::prelude::*;
use slotgate_client::{Client, Cmd, Pipeline};

const KEYS: usize = 10_000;

fn key(i: usize) -> String {
    format!("il:{i}")
}

fn value(i: usize) -> Bytes {
    Bytes::from(format!(
        "val-{i}-{}",
        i.wrapping_mul(2_654_435_761) % 1_000_003
    ))
}

/// One step of a task: a pipeline of GETs, or immediate GETs each on its own
/// spawned task (so they race the pipelines).
#[derive(Debug, Clone)]
enum Step {
    Pipeline(Vec<usize>),
    Immediate(Vec<usize>),
}

/// Cuts 0..KEYS (in a case-specific rotation) into steps and deals them to tasks.
fn plan(tasks: usize, shapes: &[(bool, usize)], task_of: &[usize], rot: usize) -> Vec<Vec<Step>> {
    let mut plans = vec![Vec::new(); tasks];
    let (mut next, mut s) = (0, 0);
    while next < KEYS {
        let (pipelined, size) = shapes[s % shapes.len()];
        let end = (next + size).min(KEYS);
        let ids: Vec<usize> = (next..end).map(|i| (i + rot) % KEYS).collect();
        let step = if pipelined {
            Step::Pipeline(ids)
        } else {
            Step::Immediate(ids)
        };
        plans[task_of[s % task_of.len()] % tasks].push(step);
        next = end;
        s += 1;
    }
    plans
}

/// Runs one task's steps; returns how many replies were wrong.
async fn run_task(client: Client, steps: Vec<Step>) -> usize {
    let mut wrong = 0;
    for step in steps {
        match step {
            Step::Pipeline(ids) => {
                let mut p = Pipeline::with_capacity(ids.len());
                for &i in &ids {
                    p.cmd(["GET", key(i).as_str()]);
                }
                for (&i, r) in ids.iter().zip(client.execute(&p).await) {
                    wrong += usize::from(
                        r.ok()
                            .and_then(|v| v.as_bytes().map(Bytes::copy_from_slice))
                            != Some(value(i)),
                    );
                }
            }
            Step::Immediate(ids) => {
                let handles: Vec<_> = ids
                    .iter()
                    .map(|&i| {
                        let c = client.clone();
                        tokio::spawn(async move { (i, c.get(key(i)).await) })
                    })
                    .collect();
                for h in handles {
                    let (i, r) = h.await.expect("task");
                    wrong += usize::from(r.ok().flatten() != Some(value(i)));
                }
            }
        }
    }
    wrong
}

#[test]
fn random_interleavings_never_cross_replies() {
    let cluster = common::cluster();
    let rt = common::runtime();
    let client = rt.block_on(async {
        let client = common::connect(&cluster).await;
        let mut p = Pipeline::with_capacity(KEYS);
        for i in 0..KEYS {
            p.add(Cmd::new("SET").arg(key(i)).arg(value(i)));
        }
        assert!(client.execute(&p).await.iter().all(|r| r.is_ok()));
        client
    });
    let client = Arc::new(client);
    let config = ProptestConfig {
        cases: 3,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    proptest!(config, |(
        tasks in 1usize..8,
        shapes in prop::collection::vec((any::<bool>(), 1usize..60), 1..40),
        task_of in prop::collection::vec(0usize..8, 1..40),
        rot in 0usize..KEYS,
    )| {
        let plans = plan(tasks, &shapes, &task_of, rot);
        let wrong: usize = rt.block_on(async {
            let handles: Vec<_> = plans
                .into_iter()
                .map(|steps| tokio::spawn(run_task((*client).clone(), steps)))
                .collect();
            let mut wrong = 0;
            for h in handles {
                wrong += h.await.expect("task");
            }
            wrong
        });
        prop_assert_eq!(wrong, 0);
    });
}
