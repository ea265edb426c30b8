//! Reading documents: a stream of JSON values from stdin or files, read incrementally.
//!
//! Whitespace-separated values and JSON Lines both work, as in jq. A syntax error ends the
//! stream of the file it is in (it cannot be resynchronised); other files are still read.
//! Stdin that is a terminal is refused with a hint instead of hanging. This module knows nothing
//! of what a document means.

use std::fs::File;
use std::io::{self, BufReader, IsTerminal, Read};
use std::path::PathBuf;

use anyhow::{Error, anyhow, bail};
use serde_json::{Deserializer, StreamDeserializer, Value, de::IoRead};

/// Where a document came from, for error messages and reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The file, or `None` for stdin.
    pub file: Option<String>,
    /// The document's position in its file (or in stdin), from 0.
    pub index: usize,
    /// False when the error is about the file itself (it could not be opened).
    pub in_document: bool,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.file, self.in_document) {
            (Some(file), true) => write!(f, "{file}: document {}", self.index),
            (Some(file), false) => write!(f, "{file}"),
            (None, _) => write!(f, "document {}", self.index),
        }
    }
}

type Stream = StreamDeserializer<'static, IoRead<BufReader<Box<dyn Read>>>, Value>;

/// Yields every document of every input in order, as `(origin, value or error)`.
pub struct Documents {
    files: std::vec::IntoIter<Option<PathBuf>>,
    current: Option<(Option<String>, Stream, usize)>,
}

impl Documents {
    /// Reads `files` in order (`-` is stdin), or stdin when there are none.
    pub fn open(files: &[PathBuf]) -> Result<Documents, Error> {
        let list: Vec<Option<PathBuf>> = if files.is_empty() {
            vec![None]
        } else {
            files
                .iter()
                .map(|f| {
                    if f.as_os_str() == "-" {
                        None
                    } else {
                        Some(f.clone())
                    }
                })
                .collect()
        };
        if list.iter().any(Option::is_none) && io::stdin().is_terminal() {
            bail!(
                "no input: stdin is a terminal; pipe a conversation in (ctx count < chat.json) or name files (ctx count chat.json)"
            );
        }
        Ok(Documents {
            files: list.into_iter(),
            current: None,
        })
    }
}

impl Iterator for Documents {
    type Item = (Origin, Result<Value, Error>);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some((name, stream, index)) = &mut self.current {
                let origin = Origin {
                    file: name.clone(),
                    index: *index,
                    in_document: true,
                };
                match stream.next() {
                    None => self.current = None,
                    Some(Ok(v)) => {
                        *index += 1;
                        return Some((origin, Ok(v)));
                    }
                    Some(Err(e)) => {
                        self.current = None;
                        let why = if e.is_io() {
                            anyhow!("cannot read input: {e}")
                        } else if e.is_eof() {
                            anyhow!("invalid JSON: the input ends inside a value ({e})")
                        } else {
                            anyhow!("invalid JSON: {e}")
                        };
                        return Some((origin, Err(why)));
                    }
                }
                continue;
            }
            let file = self.files.next()?;
            let (name, reader): (Option<String>, Box<dyn Read>) = match file {
                None => (None, Box::new(io::stdin())),
                Some(path) => {
                    let name = path.display().to_string();
                    match File::open(&path) {
                        Ok(f) => (Some(name), Box::new(f)),
                        Err(e) => {
                            let origin = Origin {
                                file: Some(name),
                                index: 0,
                                in_document: false,
                            };
                            return Some((origin, Err(anyhow!("cannot open: {e}"))));
                        }
                    }
                }
            };
            let reader = BufReader::with_capacity(1 << 16, reader);
            let stream = Deserializer::new(IoRead::new(reader)).into_iter::<Value>();
            self.current = Some((name, stream, 0));
        }
    }
}
