//! Feeds arbitrary bytes to the journal reader, verify and the writer's recovery as the last
//! segment of a run, alone or after a valid header. Nothing may panic; whatever recovery
//! accepts must afterwards read back cleanly.

#![no_main]

use std::fs;
use std::path::PathBuf;

use apollo_store::{Durability, JournalReader, JournalWriter, ReadOptions, WriterOptions, verify};
use libfuzzer_sys::fuzz_target;

const HEADER: &str = r#"{"magic":"apollo-journal","format":"1.0","run_id":"r","segment":1,"prev_seq":0,"created":"2026-11-30T02:15:07.000000Z"}"#;

fn frame(payload: &str) -> Vec<u8> {
    let body = format!("{} {payload}", payload.len());
    let crc = crc32c(body.as_bytes());
    let masked = crc.rotate_right(15).wrapping_add(0xa282_ead8);
    format!("{masked:08x} {body}\n").into_bytes()
}

/// Bitwise CRC-32C, so the fuzz crate needs no extra dependency.
fn crc32c(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0x82f6_3b78 } else { crc >> 1 };
        }
    }
    !crc
}

fn run_dir() -> PathBuf {
    std::env::temp_dir().join(format!("apollo-fuzz-{}", std::process::id()))
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let dir = run_dir();
    let _ = fs::remove_dir_all(&dir);
    let journal = dir.join("journal");
    if fs::create_dir_all(&journal).is_err() {
        return;
    }
    let mut contents = Vec::new();
    if mode & 1 == 1 {
        contents.extend(frame(HEADER));
    }
    contents.extend_from_slice(rest);
    if fs::write(journal.join("000001.log"), &contents).is_err() {
        return;
    }
    let salvage = mode & 2 == 2;
    if let Ok(reader) = JournalReader::open(&dir, ReadOptions::default().salvage(salvage)) {
        for _record in reader {}
    }
    let _ = verify(&dir);
    let options = WriterOptions::default().durability(Durability::None);
    if let Ok((writer, _report)) = JournalWriter::open_for_append(&dir, options) {
        drop(writer);
        // After recovery the journal must read cleanly to the end.
        let reader = JournalReader::open(&dir, ReadOptions::default()).expect("recovered journal opens");
        for record in reader {
            record.expect("recovered journal reads cleanly");
        }
    }
});
