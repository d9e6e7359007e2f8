//! apollo-exec: runs a unit's commands as supervised process groups. (Being built: see issue 4.)

#![warn(missing_docs)]
