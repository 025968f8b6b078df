//! `calculate` (offered unless switched off): an arithmetic expression worked out exactly, so a
//! model that has read the numbers need not add them up in its head.
//!
//! Small models read a file's numbers right and then sum, average or compare them wrong; the
//! agent's suites ask for totals, means and differences (docs/experiments.md). The expression is
//! parsed and evaluated by the `evalexpr` crate, with every number read as a float (so `7 / 2`
//! is 3.5, not 3): `+ - * / % ^`, comparisons, parentheses, lists, and the functions `sum`,
//! `mean`, `min`, `max`, `abs`, `sqrt`, `round`, `floor`, `ceil`. Square brackets are read as
//! parentheses (`sum([1, 2])`, as a model used to Python writes it). A name that is not a number
//! (`sum(crates)`: a model that thinks the tool sees the file) is refused with what to write
//! instead. It touches no file and runs nothing; its input is bounded
//! ([`MAX_EXPRESSION_CHARS`]) and so is its depth: the parser recurses once per nested operator,
//! so it runs on a thread of its own with a stack ([`STACK_BYTES`]) that holds the deepest
//! expression of that length.

use evalexpr::{
    ContextWithMutableFunctions, DefaultNumericTypes, EvalexprError, Function, HashMapContext,
    Node, Operator, Value, build_operator_tree,
};

use super::{Args, Reply, blocking, req_str};

use crate::tools::ToolError;

/// The longest expression taken, in characters: far more than any sum over a file a model
/// reads, and a bound on the parser's time, memory and depth.
pub(super) const MAX_EXPRESSION_CHARS: usize = 2_000;

/// The stack of the thread that parses and evaluates: 2,000 nested operators (`------…1`) need
/// about 8 MiB in a debug build; the rest is margin. Reserved, not touched, until used.
const STACK_BYTES: usize = 32 * 1024 * 1024;

type Num = DefaultNumericTypes;

/// `calculate(expression)`: `expression = result`.
pub(super) async fn calculate(args: Args) -> Reply {
    let expression = req_str(&args, "expression")?.trim().to_string();
    if expression.is_empty() {
        return Err(ToolError::Failed("the expression is empty".to_string()));
    }
    let chars = expression.chars().count();
    if chars > MAX_EXPRESSION_CHARS {
        return Err(ToolError::Failed(format!(
            "the expression has {chars} characters; at most {MAX_EXPRESSION_CHARS} are taken"
        )));
    }
    blocking(move || {
        let worker = std::thread::Builder::new()
            .name("calculate".into())
            .stack_size(STACK_BYTES)
            .spawn(move || work_out(&expression))
            .map_err(|e| ToolError::Failed(format!("could not start the calculation: {e}")))?;
        worker
            .join()
            .map_err(|_| ToolError::Failed("the calculation failed".to_string()))?
    })
    .await
}

/// Parse, check and evaluate `expression` (on the big-stack thread).
fn work_out(expression: &str) -> Reply {
    let bracketless: String = expression
        .chars()
        .map(|c| match c {
            '[' => '(',
            ']' => ')',
            c => c,
        })
        .collect();
    let mut tree = build_operator_tree::<Num>(&bracketless)
        .map_err(|e| unworkable(expression, &e.to_string()))?;
    let names: Vec<String> = tree
        .iter_variable_identifiers()
        .map(str::to_string)
        .collect();
    if !names.is_empty() {
        return Err(ToolError::Failed(format!(
            "`{expression}` uses {}, which {} not a number: calculate sees no file and knows no \
             names. Write the numbers themselves, copied from the result you read, for example \
             48 + 35 + 24 or max(31, 25)",
            quoted(&names),
            if names.len() == 1 { "is" } else { "are" }
        )));
    }
    as_floats(&mut tree);
    let value = tree
        .eval_with_context(&functions())
        .map_err(|e| unworkable(expression, &e.to_string()))?;
    let shown = match &value {
        Value::Float(x) if x.is_finite() => shown(*x),
        Value::Float(_) => {
            return Err(ToolError::Failed(format!(
                "`{expression}` has no finite value (a division by zero?)"
            )));
        }
        Value::Int(i) => i.to_string(),
        Value::Boolean(b) => b.to_string(),
        Value::Tuple(_) => {
            return Err(ToolError::Failed(format!(
                "`{expression}` gives a list ({value}), not one number: a comma separates values. \
                 Write numbers without thousands separators (12900, not 12,900), and sum(…) to add a list"
            )));
        }
        other => {
            return Err(ToolError::Failed(format!(
                "`{expression}` gives {other}, not a number"
            )));
        }
    };
    Ok(format!("{expression} = {shown}"))
}

fn unworkable(expression: &str, why: &str) -> ToolError {
    ToolError::Failed(format!(
        "cannot work out `{expression}`: {why}. Use numbers, + - * / % ^, parentheses, and \
         sum, mean, min, max, abs, sqrt, round, floor, ceil"
    ))
}

fn quoted(names: &[String]) -> String {
    let mut unique: Vec<&str> = Vec::new();
    for n in names {
        if !unique.contains(&n.as_str()) {
            unique.push(n);
        }
    }
    unique
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every whole number in the tree becomes a float, so that division divides.
fn as_floats(node: &mut Node<Num>) {
    if let Operator::Const { value } = node.operator_mut()
        && let Value::Int(i) = value
    {
        *value = Value::Float(*i as f64);
    }
    for child in node.children_mut() {
        as_floats(child);
    }
}

/// A function of ours: the numbers it was given, its value or why it has none.
type ListFn = fn(Vec<f64>) -> Result<f64, String>;

/// The functions besides evalexpr's own (`min`, `max`, `round`, `floor`, `ceil`).
fn functions() -> HashMapContext<Num> {
    let mut context = HashMapContext::<Num>::new();
    let list: [(&str, ListFn); 4] = [
        ("sum", |xs| Ok(xs.iter().sum())),
        ("mean", |xs| {
            if xs.is_empty() {
                Err("mean of no numbers".into())
            } else {
                Ok(xs.iter().sum::<f64>() / xs.len() as f64)
            }
        }),
        ("abs", |xs| one(&xs).map(f64::abs)),
        ("sqrt", |xs| one(&xs).map(f64::sqrt)),
    ];
    for (name, f) in list {
        // Setting a function on a fresh context cannot fail; a failure would only lose it.
        let _ = context.set_function(
            name.into(),
            Function::new(move |argument: &Value<Num>| {
                f(numbers(argument)?)
                    .map(Value::Float)
                    .map_err(EvalexprError::CustomMessage)
            }),
        );
    }
    context
}

fn one(xs: &[f64]) -> Result<f64, String> {
    match xs {
        [x] => Ok(*x),
        _ => Err(format!("takes one number, got {}", xs.len())),
    }
}

/// A function's argument as numbers: one number, or a list of them.
fn numbers(argument: &Value<Num>) -> Result<Vec<f64>, EvalexprError<Num>> {
    match argument {
        Value::Tuple(items) => items.iter().map(Value::as_number).collect(),
        Value::Empty => Ok(Vec::new()),
        single => Ok(vec![single.as_number()?]),
    }
}

/// A result as a person writes it: whole numbers without a decimal point, others to at most nine
/// decimals with the trailing zeros dropped (`0.1 + 0.2 = 0.3`, not `0.30000000000000004`).
pub(super) fn shown(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        return format!("{value:.0}");
    }
    let fixed = format!("{value:.9}");
    let trimmed = fixed.trim_end_matches('0').trim_end_matches('.');
    if trimmed == "-0" || trimmed.is_empty() {
        "0".to_string()
    } else {
        trimmed.to_string()
    }
}
