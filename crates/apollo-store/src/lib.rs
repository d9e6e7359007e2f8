//! apollo-store: the journal Apollo-11 trusts. (Being built: see issue 3.)

#![warn(missing_docs)]
