//! The walk's estimate of how many units are still to come.

use super::WalkedUnits;

#[test]
fn the_walk_reserves_room_for_the_items_its_first_ones_predict() {
    let mut walked = WalkedUnits {
        items: 256,
        ..WalkedUnits::default()
    };
    // 256 items took lines 3 to 1,283 (five lines each) of a 12,803-line file: 2,304 to come.
    walked.reserve_for_the_rest(3, 1_283, 12_803);
    let capacity = walked.units.capacity();
    assert!(capacity >= 2_304, "reserved {capacity}");
    assert!(
        capacity <= 12_803 - 1_283,
        "reserved {capacity}: more than the lines left"
    );
}

#[test]
fn a_position_that_predicts_nothing_reserves_nothing() {
    let mut walked = WalkedUnits {
        items: 256,
        ..WalkedUnits::default()
    };
    // No line taken yet, and a line past the file's end (an item of an included file).
    walked.reserve_for_the_rest(10, 10, 100);
    walked.reserve_for_the_rest(10, 200, 100);
    assert_eq!(walked.units.capacity(), 0);
}
