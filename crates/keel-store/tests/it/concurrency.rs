//! Many writers at once through one store: every run dense and complete, and every mirror
//! equal to the store.

use keel_store::MirrorStatus;
use keel_types::{RequestId, RunFilter, RunStatus};

use crate::backends::Backend;
use crate::{completed, delta, record, started, stored_seqs};

async fn sixty_four_runs_appended_concurrently_are_dense_complete_and_mirrored(backend: &Backend) {
    const RUNS: usize = 64;
    const EVENTS: u64 = 100;
    let store = backend.shared();
    let mut tasks = Vec::new();
    for n in 0..RUNS {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let id = format!("run_{n:02}");
            store
                .create_run(&record(&id, "a", RunStatus::Running))
                .await
                .unwrap();
            store.append(&[started(&id, 1)]).await.unwrap();
            // Mostly one event per call (as the runtime does), sometimes a few at once.
            let mut seq = 2;
            while seq < EVENTS {
                let size = if seq % 10 == 0 {
                    3.min(EVENTS - seq)
                } else {
                    1
                };
                let batch: Vec<_> = (seq..seq + size).map(|s| delta(&id, s)).collect();
                store.append(&batch).await.unwrap();
                seq += size;
            }
            store.append(&[completed(&id, EVENTS)]).await.unwrap();
            let mut run = store
                .get_run(&RequestId::from(id.as_str()))
                .await
                .unwrap()
                .unwrap();
            run.status = RunStatus::Completed;
            run.event_count = EVENTS;
            store.update_run(&run).await.unwrap();
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }

    let runs = store
        .list_runs(&RunFilter {
            status: Some(RunStatus::Completed),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(runs.len(), RUNS);
    for n in 0..RUNS {
        let id = format!("run_{n:02}");
        assert_eq!(
            stored_seqs(store.as_ref(), &id).await,
            (1..=EVENTS).collect::<Vec<_>>(),
            "{id}"
        );
        backend.assert_mirror(&id).await;
        if let Some(sqlite) = &backend.sqlite {
            assert_eq!(
                sqlite.verify_mirror(&RequestId::from(id.as_str())).unwrap(),
                MirrorStatus::InSync { events: EVENTS }
            );
        }
    }
    let stats = backend.write_stats();
    assert_eq!(stats.events, RUNS as u64 * EVENTS);
}

crate::contract!(sixty_four_runs_appended_concurrently_are_dense_complete_and_mirrored);
