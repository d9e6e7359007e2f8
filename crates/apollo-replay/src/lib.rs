//! apollo-replay: timelines and run-to-run diffs. (Being built: see issue 6.)

#![warn(missing_docs)]
