//! Records the target triple the host is built for (`toolhost::package::host_target`): a
//! package installs the libraries of that triple.

fn main() {
    let target = std::env::var("TARGET").expect("cargo sets TARGET for build scripts");
    println!("cargo::rustc-env=TOOLHOST_TARGET={target}");
    println!("cargo::rerun-if-changed=build.rs");
}
