//! A session keeps the owner it was created with: a later `ensure_session` with another
//! owner neither replaces it nor hides it, and reads and lists return it.

use keel_types::{SessionId, SessionOwner};

use crate::backends::Backend;

async fn a_session_keeps_the_owner_it_was_created_with(backend: &Backend) {
    let store = backend.runs();
    let alice = SessionOwner {
        key: Some("web".into()),
        user: Some("alice".into()),
    };
    let bob = SessionOwner {
        key: Some("web".into()),
        user: Some("bob".into()),
    };
    let id = SessionId::from("ses_owned");
    let created = store.ensure_session(&id, "a", &alice).await.unwrap();
    assert_eq!(created.owner.as_ref(), Some(&alice));
    // Continuing it as someone else does not change whose it is.
    let again = store.ensure_session(&id, "a", &bob).await.unwrap();
    assert_eq!(again.owner.as_ref(), Some(&alice));
    let read = store.get_session(&id).await.unwrap().unwrap();
    assert_eq!(read.owner.as_ref(), Some(&alice));
    let listed = store.list_sessions(None).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].owner.as_ref(), Some(&alice));
    // The anonymous principal (local CLI, no keys, no user) is an owner too, not "none".
    let local = SessionId::from("ses_local");
    let created = store
        .ensure_session(&local, "a", &SessionOwner::default())
        .await
        .unwrap();
    assert_eq!(created.owner, Some(SessionOwner::default()));
}

crate::contract!(a_session_keeps_the_owner_it_was_created_with);
