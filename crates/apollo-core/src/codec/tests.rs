use std::collections::BTreeSet;

use std::collections::BTreeMap;

use super::*;
use crate::capture::FileEntry;
use crate::event::SkipReason;
use crate::event::{
    HookFinished, InputComponent, InputManifestRef, PhaseRecord, RunFinished, RunReproduces,
    RunResumed, RunStarted, UnitFiles, UnitFinished, UnitMarked, UnitReused, UnitSkipped,
    UnitStarted, UnitSubmitted,
};
use crate::testing::every_field_of_every_kind;

/// The keys of every object in `value` whose value is not `null`.
fn keys_set(value: &serde_json::Value, keys: &mut BTreeSet<String>) {
    match value {
        serde_json::Value::Object(object) => {
            for (key, value) in object {
                if !value.is_null() {
                    keys.insert(key.clone());
                }
                keys_set(value, keys);
            }
        }
        serde_json::Value::Array(items) => {
            for item in items {
                keys_set(item, keys);
            }
        }
        _ => {}
    }
}

#[test]
fn every_field_of_every_kind_is_encoded_as_serde_encodes_it_and_walked_back() {
    let mut kinds = BTreeSet::new();
    let mut keys_set_somewhere = BTreeSet::new();
    for event in every_field_of_every_kind() {
        kinds.insert(event.kind());
        let by_serde = serde_json::to_vec(&event).unwrap();
        let mut fast = Vec::new();
        event.encode_json(&mut fast);
        assert_eq!(
            String::from_utf8_lossy(&fast),
            String::from_utf8_lossy(&by_serde)
        );
        let mut cursor = Cursor::new(&fast);
        assert_eq!(Event::walk_json::<true>(&mut cursor).as_ref(), Some(&event));
        assert!(cursor.at_end());
        let mut cursor = Cursor::new(&fast);
        assert!(
            Event::walk_json::<false>(&mut cursor).is_some(),
            "{event:?}"
        );
        assert!(cursor.at_end());
        keys_set(
            &serde_json::from_slice(&by_serde).unwrap(),
            &mut keys_set_somewhere,
        );
    }
    assert_eq!(kinds, Event::KINDS.iter().copied().collect());
    // Every field of every record (and of the structs inside them) was set to something
    // other than `null` in some event, so every field's encoding and walk was compared.
    let declared = [
        RunStarted::FIELD_NAMES,
        RunResumed::FIELD_NAMES,
        UnitStarted::FIELD_NAMES,
        InputComponent::FIELD_NAMES,
        InputManifestRef::FIELD_NAMES,
        UnitSubmitted::FIELD_NAMES,
        UnitFinished::FIELD_NAMES,
        PhaseRecord::FIELD_NAMES,
        UnitSkipped::FIELD_NAMES,
        SkipReason::FIELD_NAMES,
        UnitMarked::FIELD_NAMES,
        RunFinished::FIELD_NAMES,
        UnitFiles::FIELD_NAMES,
        FileEntry::FIELD_NAMES,
        RunReproduces::FIELD_NAMES,
        HookFinished::FIELD_NAMES,
        UnitReused::FIELD_NAMES,
        crate::event::RunLate::FIELD_NAMES,
        crate::event::ReproductionCompared::FIELD_NAMES,
    ];
    for name in declared.into_iter().flatten() {
        assert!(
            keys_set_somewhere.contains(*name),
            "no event of the fixture sets {name}"
        );
    }
}

/// Each variant's name, as serde names it.
fn assert_names<T: JsonUnitEnum + serde::Serialize + JsonValue>() {
    for (name, variant) in T::VARIANTS {
        let by_serde = serde_json::to_string(variant).unwrap();
        assert_eq!(by_serde, format!("\"{name}\""));
        let mut fast = Vec::new();
        variant.encode_json(&mut fast);
        assert_eq!(fast, by_serde.as_bytes());
    }
}

#[test]
fn every_variant_of_every_enum_is_named_as_serde_names_it() {
    assert_names::<InputKind>();
    assert_names::<FileSide>();
    assert_names::<AttemptStatus>();
    assert_names::<Phase>();
    assert_names::<Verdict>();
    assert_names::<RunStatus>();
    assert_names::<RunKind>();
}

/// A field written with its default is refused: serde would have left it out.
fn assert_default_json<T: IsDefault + JsonValue + Default>() {
    let mut written = Vec::new();
    T::default().encode_json(&mut written);
    assert_eq!(written, T::DEFAULT_JSON);
    assert!(T::default().is_default());
}

#[test]
fn the_default_of_each_optional_field_type_is_written_as_it_says() {
    assert_default_json::<Option<String>>();
    assert_default_json::<Option<u32>>();
    assert_default_json::<Vec<InputComponent>>();
    assert_default_json::<BTreeMap<String, serde_json::Value>>();
    assert_default_json::<u32>();
    assert_default_json::<u64>();
    assert_default_json::<RunKind>();
}

#[test]
fn a_word_with_any_byte_that_ends_or_spoils_a_string_needs_a_look() {
    for byte in 0..=u8::MAX {
        let special = byte == b'"' || byte == b'\\' || !(0x20..0x80).contains(&byte);
        for position in 0..8 {
            let mut word = *b"0123abcd";
            word[position] = byte;
            let flagged = needs_a_look(u64::from_le_bytes(word));
            assert!(flagged || !special, "{byte:#04x} at {position}");
            if !special {
                assert!(!flagged, "{byte:#04x} at {position}: a needless look");
            }
        }
    }
}
