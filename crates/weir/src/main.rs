//! The `weir` command line.

fn main() {
    println!("weir {}", env!("CARGO_PKG_VERSION"));
}
