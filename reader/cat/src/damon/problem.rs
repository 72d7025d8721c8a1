//! Why the DAMON views over time could not be drawn, and the exit status
//! each reason gives (perfabi-cat's table of exit codes).

use std::fmt;

use perfabi_record::damon::ReadError;

use crate::Failure;

/// Why the views over time could not be drawn.
#[derive(Debug)]
pub enum Problem {
    /// A value that does not fit the command line or the data: a range
    /// outside it, no such monitor or target (exit 2).
    Usage(String),
    /// No aggregation came from the segment (exit 5: retry later).
    Silent(String),
    /// The `--from` record could not be read (exit 3 if it is missing, 1
    /// for an I/O error, else 4: refused or malformed).
    Record(ReadError),
    /// The `--from` record was read but holds what DAMON never records
    /// (exit 4, as a malformed record).
    Malformed(String),
    /// The image could not be drawn or written (exit 1).
    Image(String),
}

impl Problem {
    /// perfabi-cat's exit status for it.
    pub fn exit_code(&self) -> u8 {
        match self {
            Problem::Usage(_) => 2,
            Problem::Silent(_) => 5,
            Problem::Record(ReadError::Open(e)) if e.not_found() => 3,
            Problem::Record(ReadError::Open(e)) if e.io().is_some() => 1,
            Problem::Record(ReadError::Io { .. }) | Problem::Image(_) => 1,
            Problem::Record(_) | Problem::Malformed(_) => 4,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Usage(why)
            | Problem::Silent(why)
            | Problem::Malformed(why)
            | Problem::Image(why) => f.write_str(why),
            // perfabi-record's message escapes the path and the record's
            // text itself.
            Problem::Record(e) => write!(f, "--from {}", e.advising("raise --max-record-size")),
        }
    }
}

impl From<Problem> for Failure {
    fn from(p: Problem) -> Self {
        Failure::Damon(p)
    }
}
