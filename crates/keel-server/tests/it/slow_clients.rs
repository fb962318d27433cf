//! Slow and idle clients over a real socket: a crowd of half-open connections is closed by
//! the header timeout or the per-client cap, and other clients are served meanwhile; a body
//! that stalls fails after the body timeout.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use super::socket::{Server, start};
use super::*;

/// A generous bound that only turns a hang into a failure; nothing here measures time.
const GUARD: Duration = Duration::from_secs(60);

/// How many stalling connections each test opens.
const CROWD: usize = 300;

fn workspace(server: &str) -> TempWorkspace {
    workspace_with(&format!("{{ defaultAgent: assistant, server: {server} }}"))
}

fn addr(server: &Server) -> SocketAddr {
    server.base.trim_start_matches("http://").parse().unwrap()
}

/// A connection from `from` (any loopback address) to `to`.
async fn connect_from(from: &str, to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    socket.connect(to).await.unwrap()
}

/// `count` connections from 127.0.0.1 that each send half a request line and stall.
async fn stalled_crowd(to: SocketAddr, count: usize) -> Vec<TcpStream> {
    let mut crowd = Vec::with_capacity(count);
    for _ in 0..count {
        let mut stream = connect_from("127.0.0.1", to).await;
        // A connection beyond a cap may be closed before this write: that is what it tests.
        let _ = stream.write_all(b"GET /api/hea").await;
        crowd.push(stream);
    }
    crowd
}

/// Reads until the server closes `stream` (EOF, or a reset for a connection it never read).
async fn read_until_closed(stream: &mut TcpStream) -> Vec<u8> {
    let mut received = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return received,
            Ok(n) => received.extend_from_slice(&buf[..n]),
        }
    }
}

/// A whole `GET /api/health` from `from`; what the server answered before closing.
async fn health_from(from: &str, to: SocketAddr) -> String {
    get_from(from, to, "/api/health").await
}

/// A whole `GET path` from `from`; what the server answered before closing.
async fn get_from(from: &str, to: SocketAddr, path: &str) -> String {
    let mut stream = connect_from(from, to).await;
    // A refused connection may be closed before this write; the read below then says so.
    let _ = stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: keel\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await;
    String::from_utf8_lossy(&read_until_closed(&mut stream).await).into_owned()
}

/// `keel_http_connections` as `/metrics` reports it, the scrape's own connection included.
async fn open_connections(to: SocketAddr) -> i64 {
    let answer = get_from("127.0.0.1", to, "/metrics").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    answer
        .lines()
        .find_map(|line| line.strip_prefix("keel_http_connections "))
        .unwrap_or_else(|| panic!("no keel_http_connections in {answer}"))
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn half_open_connections_are_closed_after_the_header_timeout_while_others_are_served() {
    let ws = workspace("{ headerReadTimeout: 1s, maxConnectionsPerClient: 1000 }");
    let server = start(&ws).await;
    let to = addr(&server);
    let mut crowd = stalled_crowd(to, CROWD).await;

    let answer = tokio::time::timeout(GUARD, health_from("127.0.0.2", to))
        .await
        .expect("a normal client is answered");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    let closed = tokio::time::timeout(GUARD, async {
        for stream in &mut crowd {
            read_until_closed(stream).await;
        }
    })
    .await;
    assert!(closed.is_ok(), "every stalled connection is closed");
    let _ = server.stop.map(|s| s.send(()));
}

#[tokio::test]
async fn connections_beyond_the_per_client_cap_are_closed_while_other_clients_are_served() {
    let cap = 16;
    let ws = workspace(&format!(
        "{{ headerReadTimeout: 10m, maxConnectionsPerClient: {cap} }}"
    ));
    let server = start(&ws).await;
    let to = addr(&server);
    // Connections are accepted in the order they were made: the first `cap` are held.
    let mut crowd = stalled_crowd(to, CROWD).await;

    let refused = tokio::time::timeout(GUARD, health_from("127.0.0.1", to))
        .await
        .expect("a connection beyond the cap is closed");
    assert_eq!(refused, "", "closed without an answer");
    let answer = tokio::time::timeout(GUARD, health_from("127.0.0.2", to))
        .await
        .expect("another client is answered");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    let closed = tokio::time::timeout(GUARD, async {
        for stream in &mut crowd[cap..] {
            assert_eq!(read_until_closed(stream).await, b"");
        }
    })
    .await;
    assert!(closed.is_ok(), "every connection beyond the cap is closed");

    // A held connection is still served once it finishes its request.
    let held = &mut crowd[0];
    held.write_all(b"lth HTTP/1.1\r\nHost: keel\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let answer = tokio::time::timeout(GUARD, read_until_closed(held))
        .await
        .expect("the held connection is answered");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let _ = server.stop.map(|s| s.send(()));
}

#[tokio::test]
async fn a_stalled_body_fails_after_the_body_timeout() {
    let ws = workspace("{ bodyReadTimeout: 1s }");
    let server = start(&ws).await;
    let mut stream = connect_from("127.0.0.1", addr(&server)).await;
    stream
        .write_all(
            b"POST /api/requests HTTP/1.1\r\nHost: keel\r\nContent-Type: application/json\r\n\
              Content-Length: 100\r\n\r\n{\"input\": ",
        )
        .await
        .unwrap();
    let answer = tokio::time::timeout(GUARD, read_until_closed(&mut stream))
        .await
        .expect("the stalled request is answered");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("server.bodyReadTimeout"), "{answer}");
    let _ = server.stop.map(|s| s.send(()));
}

#[tokio::test]
async fn metrics_count_the_open_connections_idle_ones_included() {
    let ws = workspace("{ headerReadTimeout: 10m }");
    let server = start(&ws).await;
    let to = addr(&server);
    let mut idle = Vec::new();
    for _ in 0..5 {
        idle.push(connect_from("127.0.0.1", to).await);
    }
    // The accept loop takes connections in the order they arrived, so the five idle ones are
    // counted before the scrape's own.
    assert_eq!(open_connections(to).await, 6);
    drop(idle);
    // A closed connection is uncounted when its task sees the end of the stream.
    tokio::time::timeout(GUARD, async {
        while open_connections(to).await != 1 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the closed connections are no longer counted");
    let _ = server.stop.map(|s| s.send(()));
}
