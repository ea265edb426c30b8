//! A scripted HTTP/1.1 server on 127.0.0.1, started by a test: it answers each connection with
//! the next reply of its script and records every request it read. Tests of ctx's HTTP client
//! (the summarizer, `count --exact`) use it so that nothing ever reaches the network.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use serde_json::{Value, json};

/// Computes a reply from the request it answers: (status, body).
pub type Responder = Box<dyn Fn(&Seen) -> (u16, String) + Send>;

/// What the server does with one connection.
pub enum Reply {
    /// Status, extra headers and body. In the body, `{auth}` becomes the request's
    /// `Authorization` and `{key}` its API key, whichever header carried it (`Authorization`,
    /// `x-api-key` or `x-goog-api-key`), so that a test can check that an echoed key is scrubbed.
    Send(u16, Vec<(&'static str, &'static str)>, String),
    /// A reply computed from the request (for runs whose requests may come in any order).
    Respond(Responder),
    /// Read the request, then say nothing for this many milliseconds and close.
    Hang(u64),
    /// Read the request and close without answering.
    Close,
}

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    /// Names lower-cased, in the order received.
    pub headers: Vec<(String, String)>,
    /// The body as JSON (`null` when it is not JSON).
    pub body: Value,
}

impl Seen {
    /// The value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The API key the request carried, whichever header carried it.
    pub fn key(&self) -> Option<&str> {
        self.header("x-api-key")
            .or_else(|| self.header("x-goog-api-key"))
            .or_else(|| {
                self.header("authorization")
                    .and_then(|a| a.strip_prefix("Bearer "))
            })
    }
}

pub struct Server {
    pub port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    /// Starts a server that answers connections with `script`, in order; once the script is
    /// exhausted, with a 599.
    pub fn start(script: Vec<Reply>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new(VecDeque::from(script)));
        let recorded = Arc::clone(&seen);
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let reply = script.lock().unwrap().pop_front();
                let recorded = Arc::clone(&recorded);
                // A thread per connection, so a hanging one does not hold up the retry.
                thread::spawn(move || serve(stream, reply, &recorded));
            }
        });
        Server { port, seen }
    }

    /// `http://127.0.0.1:PORT/v1`.
    pub fn base(&self) -> String {
        format!("{}/v1", self.root())
    }

    /// `http://127.0.0.1:PORT`.
    pub fn root(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The requests read so far, in the order they were read.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn serve(stream: TcpStream, reply: Option<Reply>, recorded: &Mutex<Vec<Seen>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let Some(seen) = read_request(&mut reader) else {
        return;
    };
    let auth = seen.header("authorization").unwrap_or("").to_string();
    let key = seen.key().unwrap_or("").to_string();
    let computed = match &reply {
        Some(Reply::Respond(f)) => Some(f(&seen)),
        _ => None,
    };
    recorded.lock().unwrap().push(seen);
    let mut stream = stream;
    let send = |stream: &mut TcpStream, status: u16, headers: &[(&str, &str)], body: &str| {
        let body = body.replace("{auth}", &auth).replace("{key}", &key);
        let mut head = format!(
            "HTTP/1.1 {status} Whatever\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n",
            body.len()
        );
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        let _ = stream.write_all(head.as_bytes());
        let _ = stream.write_all(body.as_bytes());
        let _ = stream.flush();
    };
    match reply {
        Some(Reply::Send(status, headers, body)) => send(&mut stream, status, &headers, &body),
        Some(Reply::Respond(_)) => {
            let (status, body) = computed.expect("computed above");
            send(&mut stream, status, &[], &body);
        }
        Some(Reply::Hang(ms)) => thread::sleep(Duration::from_millis(ms)),
        Some(Reply::Close) => {}
        None => {
            let body = "script exhausted";
            let _ = write!(
                stream,
                "HTTP/1.1 599 Unscripted\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    }
}

fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Seen> {
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).ok()?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':')?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    let find = |n: &str| headers.iter().find(|(h, _)| h == n).map(|(_, v)| v.clone());
    let mut body = Vec::new();
    if let Some(len) = find("content-length") {
        body.resize(len.parse().ok()?, 0);
        reader.read_exact(&mut body).ok()?;
    } else if find("transfer-encoding").is_some_and(|t| t.contains("chunked")) {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).ok()?;
            let size = usize::from_str_radix(size.trim(), 16).ok()?;
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).ok()?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    }
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    Some(Seen {
        method,
        path,
        headers,
        body,
    })
}

/// A Chat Completions reply whose message is `text`, from `served-model`.
pub fn ok(text: &str) -> Reply {
    let body = json!({
        "model": "served-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
    });
    Reply::Send(200, vec![], body.to_string())
}

/// A 429 ("slow down") asking to retry after `seconds`.
pub fn rate_limited(seconds: &'static str) -> Reply {
    let body = r#"{"error":{"message":"slow down"}}"#;
    Reply::Send(429, vec![("Retry-After", seconds)], body.into())
}

/// A redirect (`status`, 3xx) to `location`.
pub fn redirect(status: u16, location: &str) -> Reply {
    // The script's headers are static; a test's few redirects may leak their target.
    let location: &'static str = Box::leak(location.to_string().into_boxed_str());
    Reply::Send(status, vec![("Location", location)], String::new())
}

/// A port nothing listens on.
pub fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}
