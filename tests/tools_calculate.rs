//! `calculate`: arithmetic worked out exactly, every refusal with its reason, and its bounds.

mod common;

use serde_json::json;

use common::tools::{env_rw, failed};

async fn calc(expression: &str) -> Result<String, tagloop::tools::ToolError> {
    env_rw()
        .call("calculate", json!({ "expression": expression }))
        .await
}

#[tokio::test]
async fn sums_means_and_comparisons_come_out_exact() {
    for (expression, shown) in [
        ("31 + 29 + 33 + 27", "31 + 29 + 33 + 27 = 120"),
        // Every number is a float: a mean of whole numbers is not cut to a whole number.
        ("(3 + 4) / 2", "(3 + 4) / 2 = 3.5"),
        ("7 / 2", "7 / 2 = 3.5"),
        ("0.1 + 0.2", "0.1 + 0.2 = 0.3"),
        ("2^10 - 24", "2^10 - 24 = 1000"),
        ("round(10 / 3)", "round(10 / 3) = 3"),
        ("abs(4100 - 5800)", "abs(4100 - 5800) = 1700"),
        ("sqrt(16)", "sqrt(16) = 4"),
        ("sum(3200, 4100, 5600)", "sum(3200, 4100, 5600) = 12900"),
        // Square brackets read as parentheses, as a model used to Python writes a list.
        ("mean([48, 35, 24, 51])", "mean([48, 35, 24, 51]) = 39.5"),
        ("max(31, 25) - min(31, 25)", "max(31, 25) - min(31, 25) = 6"),
        ("12 > 14", "12 > 14 = false"),
        ("  1/3  ", "1/3 = 0.333333333"),
        ("-2 * 3", "-2 * 3 = -6"),
    ] {
        assert_eq!(calc(expression).await.expect(expression), shown);
    }
}

#[tokio::test]
async fn a_bad_expression_says_what_to_write() {
    // A model that thinks the tool sees the file: the names are refused, numbers asked for.
    let r = calc("sum(crates) / count(rows)").await;
    let m = failed(&r);
    assert!(m.contains("`crates`, `rows`"), "{m}");
    assert!(m.contains("Write the numbers themselves"), "{m}");
    // A thousands separator makes a list, which is not one number.
    let r = calc("12,900 + 100").await;
    assert!(failed(&r).contains("12900, not 12,900"), "{r:?}");
    let r = calc("(1 + 2").await;
    assert!(failed(&r).contains("cannot work out `(1 + 2`"), "{r:?}");
    let r = calc("1 / 0").await;
    assert!(failed(&r).contains("no finite value"), "{r:?}");
    let r = calc("\"ten\"").await;
    assert!(failed(&r).contains("not a number"), "{r:?}");
    let r = calc("sqrt(4, 9)").await;
    assert!(failed(&r).contains("takes one number"), "{r:?}");
    let r = calc("   ").await;
    assert!(failed(&r).contains("empty"), "{r:?}");
    let r = env_rw().call("calculate", json!({})).await;
    assert!(failed(&r).contains("expression"), "{r:?}");
}

#[tokio::test]
async fn the_longest_and_deepest_expressions_are_bounded() {
    let long = vec!["1"; 1001].join("+"); // 2,001 characters
    let r = calc(&long).await;
    assert!(failed(&r).contains("2001 characters"), "{r:?}");
    let just = vec!["1"; 1000].join("+"); // 1,999
    assert!(calc(&just).await.expect("taken").ends_with("= 1000"));
    // The deepest the bound allows: the parser recurses once per operator, and the tool's own
    // thread holds it (a 2 MiB stack overflowed at 1,999 unary minus signs).
    let deep = format!("{}1", "-".repeat(1999));
    assert!(calc(&deep).await.expect("taken").ends_with("= -1"));
    let nested = format!("{}1{}", "(".repeat(999), ")".repeat(999));
    assert!(calc(&nested).await.expect("taken").ends_with("= 1"));
}
