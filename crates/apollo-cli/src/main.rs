//! The `apollo` binary.

fn main() {
    std::process::exit(2);
}
