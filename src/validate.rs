//! Raw tool arguments -> [`ValidatedCall`], before anything runs.
//!
//! A `ValidatedCall` can only be built by [`validate`], so whatever reaches
//! the argv builder has passed every check: known properties, types, ranges,
//! choices, required arguments, no NUL bytes. Each refusal is a tool error
//! whose message says what to change, because the reader is a model that
//! will try again. The paths it holds are confined in a second step
//! ([`ValidatedCall::confine`]), which changes the type so that only a fully
//! checked call can become an argv.

use serde_json::{Map, Number, Value};

use crate::catalog::ArgType;
use crate::confine::{self, ConfinedPath, Root};
use crate::error::{ErrorCode, ToolError};
use crate::protect::Protected;
use crate::tools::{Param, Tool};

/// Longest single value accepted; far below the kernel's per-argument limit.
pub const MAX_VALUE_BYTES: usize = 64 * 1024;

/// A path value before confinement, with the property it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawPath {
    pub property: String,
    pub raw: String,
}

/// One checked value, ready to be spelled in argv.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scalar<P> {
    /// A string or a choice, as given.
    Text(String),
    Integer(i64),
    /// A number already in plain decimal notation.
    Decimal(String),
    Path(P),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlagValue<P> {
    /// A boolean flag given as true: passed bare.
    Present,
    Value(Scalar<P>),
}

/// A tool call whose arguments passed every check; `P` is the path stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidatedCall<P> {
    command: String,
    /// `(--name, value)` in catalog order; a repeatable flag once per value.
    flags: Vec<(String, FlagValue<P>)>,
    positionals: Vec<Scalar<P>>,
}

impl<P> ValidatedCall<P> {
    pub fn command(&self) -> &str {
        &self.command
    }

    pub fn flags(&self) -> &[(String, FlagValue<P>)] {
        &self.flags
    }

    pub fn positionals(&self) -> &[Scalar<P>] {
        &self.positionals
    }
}

impl ValidatedCall<RawPath> {
    /// Confine every path value to `root`, away from protected files; the
    /// first refusal is returned.
    pub fn confine(
        self,
        root: &Root,
        protected: &Protected,
    ) -> Result<ValidatedCall<ConfinedPath>, ToolError> {
        let conf = |s: Scalar<RawPath>| -> Result<Scalar<ConfinedPath>, ToolError> {
            Ok(match s {
                Scalar::Text(t) => Scalar::Text(t),
                Scalar::Integer(i) => Scalar::Integer(i),
                Scalar::Decimal(d) => Scalar::Decimal(d),
                Scalar::Path(p) => {
                    Scalar::Path(confine::confine(root, protected, &p.property, &p.raw)?)
                }
            })
        };
        let flags = self
            .flags
            .into_iter()
            .map(|(name, v)| {
                Ok((
                    name,
                    match v {
                        FlagValue::Present => FlagValue::Present,
                        FlagValue::Value(s) => FlagValue::Value(conf(s)?),
                    },
                ))
            })
            .collect::<Result<Vec<_>, ToolError>>()?;
        let positionals = self
            .positionals
            .into_iter()
            .map(conf)
            .collect::<Result<Vec<_>, ToolError>>()?;
        Ok(ValidatedCall {
            command: self.command,
            flags,
            positionals,
        })
    }
}

#[cfg(test)]
impl ValidatedCall<RawPath> {
    /// Later steps' tests need confined paths without a filesystem behind them.
    pub(crate) fn confine_for_test(self, root: &str) -> ValidatedCall<ConfinedPath> {
        let conf = |s: Scalar<RawPath>| match s {
            Scalar::Text(t) => Scalar::Text(t),
            Scalar::Integer(i) => Scalar::Integer(i),
            Scalar::Decimal(d) => Scalar::Decimal(d),
            Scalar::Path(p) => Scalar::Path(ConfinedPath::for_test(&format!("{root}/{}", p.raw))),
        };
        ValidatedCall {
            command: self.command,
            flags: self
                .flags
                .into_iter()
                .map(|(n, v)| {
                    let v = match v {
                        FlagValue::Present => FlagValue::Present,
                        FlagValue::Value(s) => FlagValue::Value(conf(s)),
                    };
                    (n, v)
                })
                .collect(),
            positionals: self.positionals.into_iter().map(conf).collect(),
        }
    }
}

fn invalid(msg: String) -> ToolError {
    ToolError::new(ErrorCode::InvalidArgument, msg)
}

/// Check `args` against `tool`'s arguments.
pub fn validate(
    tool: &Tool,
    args: &Map<String, Value>,
) -> Result<ValidatedCall<RawPath>, ToolError> {
    let params = tool.params();
    for key in args.keys() {
        if params.iter().any(|p| &p.property == key) {
            continue;
        }
        let key_shown = shown_key(key);
        if tool.is_withheld(key) {
            return Err(ToolError::new(
                ErrorCode::UnknownArgument,
                format!(
                    "`{key_shown}` is not available through this server; call `{}` without it.",
                    tool.name
                ),
            ));
        }
        let allowed: Vec<&str> = params.iter().map(|p| p.property.as_str()).collect();
        let list = if allowed.is_empty() {
            format!("`{}` takes no arguments", tool.name)
        } else {
            format!("`{}` accepts: {}", tool.name, allowed.join(", "))
        };
        return Err(ToolError::new(
            ErrorCode::UnknownArgument,
            format!("Unknown argument `{key_shown}`; {list}."),
        ));
    }

    let mut flags = Vec::new();
    let mut positionals = Vec::new();
    let mut missing_positional: Option<&str> = None;
    for p in params {
        let values: Vec<Scalar<RawPath>> = match args.get(&p.property) {
            None => {
                if p.required {
                    return Err(missing(tool, p));
                }
                Vec::new()
            }
            Some(v) => values_of(p, v)?,
        };
        // A boolean is given by its presence; `false` is still an answer.
        if p.required && values.is_empty() && p.ty != ArgType::Boolean {
            return Err(missing(tool, p));
        }
        if p.positional {
            // Positionals are passed by position: a gap would shift a later
            // value into an earlier slot.
            match (values.is_empty(), missing_positional) {
                (true, None) => missing_positional = Some(&p.property),
                (false, Some(gap)) => {
                    return Err(invalid(format!(
                    "`{}` can only be given together with `{gap}`; add `{gap}` or leave `{}` out.",
                    p.property, p.property
                )))
                }
                _ => {}
            }
            positionals.extend(values);
        } else if p.ty == ArgType::Boolean {
            if args.get(&p.property) == Some(&Value::Bool(true)) {
                flags.push((p.argument.clone(), FlagValue::Present));
            }
        } else {
            flags.extend(
                values
                    .into_iter()
                    .map(|v| (p.argument.clone(), FlagValue::Value(v))),
            );
        }
    }

    Ok(ValidatedCall {
        command: tool.command.clone(),
        flags,
        positionals,
    })
}

fn missing(tool: &Tool, p: &Param) -> ToolError {
    ToolError::new(
        ErrorCode::MissingArgument,
        format!(
            "`{}` needs the argument `{}` ({}); add it.",
            tool.name,
            p.property,
            type_phrase(p)
        ),
    )
}

/// Property names come from the client; keep them short and printable in messages.
fn shown_key(key: &str) -> String {
    let clean: String = key
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .take(64)
        .collect();
    if key.chars().count() > 64 {
        format!("{clean}…")
    } else {
        clean
    }
}

fn values_of(p: &Param, v: &Value) -> Result<Vec<Scalar<RawPath>>, ToolError> {
    if v.is_null() {
        return Err(invalid(format!(
            "`{}` is null; leave it out instead, or give {}.",
            p.property,
            type_phrase(p)
        )));
    }
    if p.repeatable {
        let items = v.as_array().ok_or_else(|| {
            invalid(format!(
                "`{}` takes an array of values ({}), e.g. [{}].",
                p.property,
                type_phrase(p),
                example(p)
            ))
        })?;
        items.iter().map(|item| scalar(p, item)).collect()
    } else if v.is_array() {
        Err(invalid(format!(
            "`{}` takes one value ({}), not an array.",
            p.property,
            type_phrase(p)
        )))
    } else if p.ty == ArgType::Boolean {
        match v {
            Value::Bool(_) => Ok(Vec::new()),
            _ => Err(wrong_type(p, v)),
        }
    } else {
        Ok(vec![scalar(p, v)?])
    }
}

fn scalar(p: &Param, v: &Value) -> Result<Scalar<RawPath>, ToolError> {
    match p.ty {
        ArgType::String | ArgType::Path | ArgType::Choice => {
            let s = v.as_str().ok_or_else(|| wrong_type(p, v))?;
            check_text(p, s)?;
            match p.ty {
                ArgType::Path => Ok(Scalar::Path(RawPath {
                    property: p.property.clone(),
                    raw: s.to_string(),
                })),
                ArgType::Choice if !p.choices.iter().any(|c| c == s) => Err(invalid(format!(
                    "`{}` must be one of: {} (got \"{}\").",
                    p.property,
                    p.choices.join(", "),
                    shown_key(s)
                ))),
                _ => Ok(Scalar::Text(s.to_string())),
            }
        }
        ArgType::Integer => {
            let n = v.as_number().ok_or_else(|| wrong_type(p, v))?;
            let i = whole(n).ok_or_else(|| {
                invalid(format!(
                    "`{}` must be a whole number (got {n}).",
                    p.property
                ))
            })?;
            let lo = p.minimum.as_ref().and_then(Number::as_i64);
            let hi = p.maximum.as_ref().and_then(Number::as_i64);
            if lo.is_some_and(|lo| i < lo) || hi.is_some_and(|hi| i > hi) {
                return Err(out_of_range(p, n));
            }
            Ok(Scalar::Integer(i))
        }
        ArgType::Number => {
            let n = v.as_number().ok_or_else(|| wrong_type(p, v))?;
            let f = n
                .as_f64()
                .filter(|f| f.is_finite())
                .ok_or_else(|| out_of_range(p, n))?;
            let lo = p.minimum.as_ref().and_then(Number::as_f64);
            let hi = p.maximum.as_ref().and_then(Number::as_f64);
            if lo.is_some_and(|lo| f < lo) || hi.is_some_and(|hi| f > hi) {
                return Err(out_of_range(p, n));
            }
            let d = plain_decimal(&n.to_string()).ok_or_else(|| {
                invalid(format!("`{}` has too many digits; round it.", p.property))
            })?;
            Ok(Scalar::Decimal(d))
        }
        ArgType::Boolean => Err(wrong_type(p, v)),
    }
}

/// The value of an integral JSON number, also when written as `14.0` or `1e3`.
fn whole(n: &Number) -> Option<i64> {
    if let Some(i) = n.as_i64() {
        return Some(i);
    }
    let f = n.as_f64()?;
    // i64::MAX is not exactly representable; stay strictly inside.
    (f.is_finite() && f.fract() == 0.0 && f.abs() < 9.0e18).then_some(f as i64)
}

fn check_text(p: &Param, s: &str) -> Result<(), ToolError> {
    if s.contains('\0') {
        return Err(invalid(format!(
            "`{}` contains a NUL byte, which cannot be passed to a command; remove it.",
            p.property
        )));
    }
    if s.len() > MAX_VALUE_BYTES {
        return Err(invalid(format!(
            "`{}` is longer than {MAX_VALUE_BYTES} bytes; give a shorter value.",
            p.property
        )));
    }
    Ok(())
}

fn out_of_range(p: &Param, n: &Number) -> ToolError {
    let range = match (&p.minimum, &p.maximum) {
        (Some(lo), Some(hi)) => format!("between {lo} and {hi}"),
        (Some(lo), None) => format!("at least {lo}"),
        (None, Some(hi)) => format!("at most {hi}"),
        (None, None) => "a finite number".to_string(),
    };
    invalid(format!("`{}` must be {range} (got {n}).", p.property))
}

fn wrong_type(p: &Param, v: &Value) -> ToolError {
    let got = match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    invalid(format!(
        "`{}` must be {}, got {got}.",
        p.property,
        type_phrase(p)
    ))
}

fn type_phrase(p: &Param) -> String {
    let one = match p.ty {
        ArgType::Boolean => "true or false".to_string(),
        ArgType::String => "a string".to_string(),
        ArgType::Integer => "an integer".to_string(),
        ArgType::Number => "a number".to_string(),
        ArgType::Path => "a file path inside the root folder".to_string(),
        ArgType::Choice => format!("one of: {}", p.choices.join(", ")),
    };
    if p.repeatable {
        format!("each {one}")
    } else {
        one
    }
}

fn example(p: &Param) -> String {
    match p.ty {
        ArgType::Choice => p
            .choices
            .first()
            .map(|c| format!("\"{c}\""))
            .unwrap_or_default(),
        ArgType::Integer | ArgType::Number => p
            .minimum
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_else(|| "1".to_string()),
        ArgType::Boolean => "true".to_string(),
        ArgType::String | ArgType::Path => "\"…\"".to_string(),
    }
}

/// Longest plain-decimal spelling of a number we pass on.
const MAX_DECIMAL_LEN: usize = 400;

/// A JSON number literal in plain decimal notation: `2.5e-1` -> `0.25`,
/// `1E3` -> `1000`, `0.50` -> `0.5`. Exact (digits are moved, not
/// computed); `None` for something that isn't a number literal or whose
/// plain spelling would be unreasonably long.
pub fn plain_decimal(literal: &str) -> Option<String> {
    let (negative, rest) = match literal.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, literal),
    };
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(i) => (&rest[..i], rest[i + 1..].parse::<i64>().ok()?),
        None => (rest, 0),
    };
    let (int_part, frac_part) = match mantissa.split_once('.') {
        Some((a, b)) => (a, b),
        None => (mantissa, ""),
    };
    if int_part.is_empty()
        || !int_part.bytes().all(|b| b.is_ascii_digit())
        || !frac_part.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    if exponent.unsigned_abs() > MAX_DECIMAL_LEN as u64 {
        return None;
    }

    let digits: String = format!("{int_part}{frac_part}");
    // Position of the decimal point within `digits`.
    let point = int_part.len() as i64 + exponent;
    let (int_digits, frac_digits) = if point <= 0 {
        (
            String::new(),
            format!("{}{digits}", "0".repeat(point.unsigned_abs() as usize)),
        )
    } else if point as usize >= digits.len() {
        (
            format!("{digits}{}", "0".repeat(point as usize - digits.len())),
            String::new(),
        )
    } else {
        (
            digits[..point as usize].to_string(),
            digits[point as usize..].to_string(),
        )
    };
    let int_digits = int_digits.trim_start_matches('0');
    let frac_digits = frac_digits.trim_end_matches('0');

    let mut out = String::new();
    if negative && !(int_digits.is_empty() && frac_digits.is_empty()) {
        out.push('-');
    }
    out.push_str(if int_digits.is_empty() {
        "0"
    } else {
        int_digits
    });
    if !frac_digits.is_empty() {
        out.push('.');
        out.push_str(frac_digits);
    }
    (out.len() <= MAX_DECIMAL_LEN).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{catalog, tools};
    use serde_json::json;

    fn tool() -> Tool {
        let mut v = catalog::tests::sample();
        v["commands"] = json!([{
            "name": "campaign-check", "summary": "s", "tags": ["read_only"], "formats": ["json"],
            "positionals": [
                {"name": "campaign", "type": "path", "required": true},
                {"name": "extra", "type": "string"},
                {"name": "more", "type": "string", "repeatable": true}
            ],
            "flags": [
                {"name": "--strict", "type": "boolean"},
                {"name": "--days", "type": "integer", "minimum": 1, "maximum": 365},
                {"name": "--ratio", "type": "number", "minimum": 0, "maximum": 1},
                {"name": "--channel", "type": "choice", "choices": ["x", "linkedin"], "repeatable": true},
                {"name": "--label", "type": "string"},
                {"name": "--weight", "type": "number", "minimum": 0.5},
                {"name": "--top", "type": "integer", "maximum": 10},
                {"name": "--online", "type": "boolean", "network": true},
                {"name": "--format", "type": "choice", "choices": ["json"], "output_format": true}
            ]
        }]);
        let c = catalog::parse(v.to_string().as_bytes()).unwrap();
        let (set, _) = tools::build(&c, false);
        set.get("campaign_check").unwrap().clone()
    }

    fn check(args: Value) -> Result<ValidatedCall<RawPath>, ToolError> {
        validate(&tool(), args.as_object().unwrap())
    }

    fn refused(args: Value) -> ToolError {
        check(args.clone()).expect_err(&format!("accepted {args}"))
    }

    fn path(raw: &str) -> Scalar<RawPath> {
        Scalar::Path(RawPath {
            property: "campaign".into(),
            raw: raw.into(),
        })
    }

    #[test]
    fn a_full_call_keeps_catalog_order_and_spelling() {
        // Parsed from text so that the number keeps its exponent spelling.
        let args: Value = serde_json::from_str(
            r#"{"label": "-x", "channel": ["x", "linkedin"], "ratio": 2.5e-1, "days": 14,
                "strict": true, "more": ["m1", "m2"], "extra": "e", "campaign": "c.yaml"}"#,
        )
        .unwrap();
        let c = check(args).unwrap();
        assert_eq!(c.command(), "campaign-check");
        assert_eq!(
            c.flags(),
            &[
                ("--strict".to_string(), FlagValue::Present),
                ("--days".to_string(), FlagValue::Value(Scalar::Integer(14))),
                (
                    "--ratio".to_string(),
                    FlagValue::Value(Scalar::Decimal("0.25".into()))
                ),
                (
                    "--channel".to_string(),
                    FlagValue::Value(Scalar::Text("x".into()))
                ),
                (
                    "--channel".to_string(),
                    FlagValue::Value(Scalar::Text("linkedin".into()))
                ),
                (
                    "--label".to_string(),
                    FlagValue::Value(Scalar::Text("-x".into()))
                ),
            ]
        );
        assert_eq!(
            c.positionals(),
            &[
                path("c.yaml"),
                Scalar::Text("e".into()),
                Scalar::Text("m1".into()),
                Scalar::Text("m2".into())
            ]
        );
    }

    #[test]
    fn false_booleans_and_empty_arrays_add_nothing() {
        let c = check(json!({"campaign": "c", "strict": false, "channel": []})).unwrap();
        assert!(c.flags().is_empty());
    }

    #[test]
    fn integral_numbers_are_integers() {
        let c = check(json!({"campaign": "c", "days": 14.0})).unwrap();
        assert_eq!(c.flags()[0].1, FlagValue::Value(Scalar::Integer(14)));
        let c = check(json!({"campaign": "c", "ratio": 1})).unwrap();
        assert_eq!(
            c.flags()[0].1,
            FlagValue::Value(Scalar::Decimal("1".into()))
        );
    }

    #[test]
    fn unknown_property_names_the_allowed_ones() {
        let e = refused(json!({"campaign": "c", "dayz": 3}));
        assert_eq!(e.code(), "unknown_argument");
        assert!(e.message().contains("`dayz`"));
        assert!(
            e.message()
                .contains("campaign, extra, more, strict, days, ratio, channel, label"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn withheld_argument_is_not_available() {
        for key in ["online", "format"] {
            let e = refused(json!({"campaign": "c", key: true}));
            assert_eq!(e.code(), "unknown_argument");
            assert!(
                e.message().contains("not available through this server"),
                "{}",
                e.message()
            );
        }
    }

    #[test]
    fn wrong_types_are_invalid() {
        for args in [
            json!({"campaign": 3}),
            json!({"campaign": "c", "days": "14"}),
            json!({"campaign": "c", "strict": "yes"}),
            json!({"campaign": "c", "ratio": "0.5"}),
            json!({"campaign": "c", "label": {"a": 1}}),
            json!({"campaign": "c", "channel": [1]}),
            json!({"campaign": "c", "label": null}),
        ] {
            let e = refused(args.clone());
            assert_eq!(e.code(), "invalid_argument", "{args}");
        }
        assert!(refused(json!({"campaign": "c", "days": "14"}))
            .message()
            .contains("must be an integer, got a string"));
        assert!(refused(json!({"campaign": "c", "label": null}))
            .message()
            .contains("leave it out"));
    }

    #[test]
    fn fractional_integer_is_refused() {
        let e = refused(json!({"campaign": "c", "days": 1.5}));
        assert_eq!(e.code(), "invalid_argument");
        assert!(e.message().contains("whole number"), "{}", e.message());
    }

    #[test]
    fn out_of_range_says_the_range() {
        let e = refused(json!({"campaign": "c", "days": 400}));
        assert!(
            e.message().contains("between 1 and 365 (got 400)"),
            "{}",
            e.message()
        );
        let e = refused(json!({"campaign": "c", "days": 0}));
        assert_eq!(e.code(), "invalid_argument");
        let e = refused(json!({"campaign": "c", "ratio": 1.01}));
        assert!(e.message().contains("between 0 and 1"), "{}", e.message());
        let e = refused(json!({"campaign": "c", "days": 1e30}));
        assert_eq!(e.code(), "invalid_argument");
    }

    #[test]
    fn not_in_choices_lists_them() {
        let e = refused(json!({"campaign": "c", "channel": ["x", "fb"]}));
        assert!(
            e.message().contains("one of: x, linkedin (got \"fb\")"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn missing_required() {
        let e = refused(json!({"days": 3}));
        assert_eq!(e.code(), "missing_argument");
        assert!(e.message().contains("`campaign`"));
    }

    #[test]
    fn array_for_single_and_scalar_for_repeatable() {
        let e = refused(json!({"campaign": ["a", "b"]}));
        assert!(e.message().contains("not an array"), "{}", e.message());
        let e = refused(json!({"campaign": "c", "channel": "x"}));
        assert!(e.message().contains("array of values"), "{}", e.message());
    }

    #[test]
    fn nul_bytes_and_huge_values_are_refused() {
        let e = refused(json!({"campaign": "c", "label": "a\u{0}b"}));
        assert!(e.message().contains("NUL"));
        let e = refused(json!({"campaign": "c\u{0}"}));
        assert!(e.message().contains("NUL"));
        let e = refused(json!({"campaign": "c", "more": ["ok", "x\u{0}"]}));
        assert!(e.message().contains("NUL"));
        let e = refused(json!({"campaign": "c", "label": "x".repeat(MAX_VALUE_BYTES + 1)}));
        assert!(e.message().contains("longer than"));
    }

    #[test]
    fn positional_gap_is_refused() {
        let e = refused(json!({"campaign": "c", "more": ["m"]}));
        assert_eq!(e.code(), "invalid_argument");
        assert!(
            e.message().contains("together with `extra`"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn confine_turns_raw_paths_into_confined_ones() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("c.yaml"), "x").unwrap();
        let root = Root::new(dir.path()).unwrap();
        let c = check(json!({"campaign": "c.yaml", "label": "l"}))
            .unwrap()
            .confine(&root, &Protected::new(&[], &[]).unwrap())
            .unwrap();
        match &c.positionals()[0] {
            Scalar::Path(p) => assert_eq!(p.as_str(), root.path().join("c.yaml").to_str().unwrap()),
            other => panic!("{other:?}"),
        }
        let e = check(json!({"campaign": "../x"}))
            .unwrap()
            .confine(&root, &Protected::new(&[], &[]).unwrap())
            .unwrap_err();
        assert_eq!(e.code(), "path_outside_root");
    }

    /// The one flag value a call with only `campaign` and `args` gives.
    fn flag_value(args: Value) -> FlagValue<RawPath> {
        let mut args = args;
        args["campaign"] = json!("c");
        let c = check(args.clone()).unwrap_or_else(|e| panic!("{args}: {}", e.message()));
        assert_eq!(c.flags().len(), 1, "{args}");
        c.flags()[0].1.clone()
    }

    #[test]
    fn integer_bounds_are_inclusive_to_the_exact_value() {
        for (days, ok) in [
            (0, false),
            (1, true),
            (2, true),
            (364, true),
            (365, true),
            (366, false),
        ] {
            let args = json!({"campaign": "c", "days": days});
            if ok {
                assert_eq!(
                    flag_value(args),
                    FlagValue::Value(Scalar::Integer(days)),
                    "{days}"
                );
            } else {
                let e = refused(args);
                assert_eq!(e.code(), "invalid_argument");
                assert_eq!(
                    e.message(),
                    format!("`days` must be between 1 and 365 (got {days})."),
                );
            }
        }
        // One bound only.
        assert_eq!(
            flag_value(json!({"top": 10})),
            FlagValue::Value(Scalar::Integer(10))
        );
        assert_eq!(
            flag_value(json!({"top": -5})),
            FlagValue::Value(Scalar::Integer(-5))
        );
        assert_eq!(
            refused(json!({"campaign": "c", "top": 11})).message(),
            "`top` must be at most 10 (got 11)."
        );
    }

    #[test]
    fn number_bounds_are_inclusive_to_the_exact_value() {
        for (ratio, want) in [
            ("0", "0"),
            ("0.0", "0"),
            ("1", "1"),
            ("1.0", "1"),
            ("0.5", "0.5"),
        ] {
            let args: Value =
                serde_json::from_str(&format!(r#"{{"campaign": "c", "ratio": {ratio}}}"#)).unwrap();
            assert_eq!(
                flag_value(args),
                FlagValue::Value(Scalar::Decimal(want.into())),
                "{ratio}"
            );
        }
        for ratio in ["-0.01", "-1", "1.01", "2"] {
            let args: Value =
                serde_json::from_str(&format!(r#"{{"campaign": "c", "ratio": {ratio}}}"#)).unwrap();
            let e = refused(args);
            assert_eq!(e.code(), "invalid_argument", "{ratio}");
            assert_eq!(
                e.message(),
                format!("`ratio` must be between 0 and 1 (got {ratio})."),
            );
        }
        // A minimum only.
        assert_eq!(
            flag_value(json!({"weight": 0.5})),
            FlagValue::Value(Scalar::Decimal("0.5".into()))
        );
        assert_eq!(
            flag_value(json!({"weight": 1000})),
            FlagValue::Value(Scalar::Decimal("1000".into()))
        );
        assert_eq!(
            refused(json!({"campaign": "c", "weight": 0.25})).message(),
            "`weight` must be at least 0.5 (got 0.25)."
        );
    }

    #[test]
    fn an_integer_written_as_a_decimal_or_exponent_is_whole() {
        let args: Value = serde_json::from_str(r#"{"campaign": "c", "days": 1e2}"#).unwrap();
        assert_eq!(flag_value(args), FlagValue::Value(Scalar::Integer(100)));
        let args: Value = serde_json::from_str(r#"{"campaign": "c", "top": -3.0}"#).unwrap();
        assert_eq!(flag_value(args), FlagValue::Value(Scalar::Integer(-3)));
        // Too big for an integer, whatever the range says.
        for big in ["9e18", "9.5e18", "1e19", "-9e18"] {
            let args: Value =
                serde_json::from_str(&format!(r#"{{"campaign": "c", "top": {big}}}"#)).unwrap();
            assert!(refused(args).message().contains("whole number"), "{big}");
        }
        assert_eq!(whole(&Number::from(7)), Some(7));
        assert_eq!(
            whole(&serde_json::from_str("-8.0e17").unwrap()),
            Some(-800_000_000_000_000_000)
        );
        assert_eq!(whole(&serde_json::from_str("0.5").unwrap()), None);
    }

    #[test]
    fn a_value_is_accepted_up_to_exactly_64_kib() {
        assert_eq!(MAX_VALUE_BYTES, 65_536);
        for len in [
            1024,
            1025,
            4096,
            32 * 1024,
            MAX_VALUE_BYTES - 1,
            MAX_VALUE_BYTES,
        ] {
            let label = "x".repeat(len);
            assert_eq!(
                flag_value(json!({"label": label.clone()})),
                FlagValue::Value(Scalar::Text(label)),
                "{len}"
            );
        }
        // Bytes, not characters: 32,768 two-byte characters are exactly the limit.
        let wide = "é".repeat(MAX_VALUE_BYTES / 2);
        assert!(check(json!({"campaign": "c", "label": wide})).is_ok());
        let wide = format!("{}x", "é".repeat(MAX_VALUE_BYTES / 2));
        let e = refused(json!({"campaign": "c", "label": wide}));
        assert_eq!(
            e.message(),
            "`label` is longer than 65536 bytes; give a shorter value."
        );
        let e = refused(json!({"campaign": "x".repeat(MAX_VALUE_BYTES + 1)}));
        assert_eq!(
            e.message(),
            "`campaign` is longer than 65536 bytes; give a shorter value."
        );
        // A path at the limit passes this step (confinement judges it next).
        assert!(check(json!({"campaign": "x".repeat(MAX_VALUE_BYTES)})).is_ok());
    }

    #[test]
    fn a_long_unknown_property_is_shown_cut_at_64_characters() {
        let shown = |key: &str| {
            let mut args = Map::new();
            args.insert("campaign".into(), json!("c"));
            args.insert(key.into(), json!(1));
            let e = validate(&tool(), &args).unwrap_err();
            let m = e.message().to_string();
            m.strip_prefix("Unknown argument `")
                .and_then(|rest| rest.split_once("`;"))
                .map(|(key, _)| key.to_string())
                .unwrap_or_else(|| panic!("{m}"))
        };
        let k64 = "k".repeat(64);
        assert_eq!(shown(&k64), k64);
        assert_eq!(shown(&"k".repeat(65)), format!("{k64}…"));
        assert_eq!(shown("a\u{7}b"), "a?b");
    }

    #[test]
    fn required_booleans_and_required_lists() {
        let mut v = catalog::tests::sample();
        v["commands"] = json!([{
            "name": "report", "summary": "s", "tags": ["read_only"], "formats": ["json"],
            "positionals": [],
            "flags": [
                {"name": "--confirm", "type": "boolean", "required": true},
                {"name": "--tag", "type": "string", "repeatable": true, "required": true},
                {"name": "--format", "type": "choice", "choices": ["json"], "output_format": true}
            ]
        }]);
        let c = catalog::parse(v.to_string().as_bytes()).unwrap();
        let (set, _) = tools::build(&c, false);
        let tool = set.get("report").unwrap().clone();
        let run = |args: Value| validate(&tool, args.as_object().unwrap());
        // A required boolean is answered by `false` as well as `true`.
        let ok = run(json!({"confirm": false, "tag": ["a"]})).unwrap();
        assert_eq!(
            ok.flags(),
            &[(
                "--tag".to_string(),
                FlagValue::Value(Scalar::Text("a".into()))
            )]
        );
        let ok = run(json!({"confirm": true, "tag": ["a", "b"]})).unwrap();
        assert_eq!(ok.flags().len(), 3);
        assert_eq!(ok.flags()[0], ("--confirm".to_string(), FlagValue::Present));
        // A required list needs at least one value.
        let e = run(json!({"confirm": true, "tag": []})).unwrap_err();
        assert_eq!(e.code(), "missing_argument");
        assert_eq!(
            e.message(),
            "`report` needs the argument `tag` (each a string); add it."
        );
        let e = run(json!({"tag": ["a"]})).unwrap_err();
        assert_eq!(e.code(), "missing_argument");
        assert!(e.message().contains("(true or false)"), "{}", e.message());
    }

    #[test]
    fn plain_decimal_at_its_length_limit_and_around_the_point() {
        for (input, want) in [
            ("1.5e1", "15"),
            ("1.25e1", "12.5"),
            ("5e-1", "0.5"),
            ("-5e-1", "-0.5"),
            ("-0", "0"),
            ("0e5", "0"),
            ("100", "100"),
            ("10.50", "10.5"),
            ("0.000", "0"),
            ("-0.000e3", "0"),
            ("123e-2", "1.23"),
            ("123e-3", "0.123"),
        ] {
            assert_eq!(plain_decimal(input).as_deref(), Some(want), "{input}");
        }
        let four_hundred = format!("1{}", "0".repeat(399));
        assert_eq!(plain_decimal("1e399"), Some(four_hundred.clone()));
        assert_eq!(plain_decimal("0.1e400"), Some(four_hundred));
        assert_eq!(plain_decimal("1e400"), None);
        assert_eq!(plain_decimal("0.1e401"), None);
        let smallest = format!("0.{}1", "0".repeat(397));
        assert_eq!(smallest.len(), 400);
        assert_eq!(plain_decimal("1e-398"), Some(smallest));
        assert_eq!(plain_decimal("1e-399"), None);
    }

    #[test]
    fn a_list_given_one_value_is_shown_an_example_of_its_type() {
        let mut v = catalog::tests::sample();
        v["commands"] = json!([{
            "name": "lists", "summary": "s", "tags": ["read_only"], "formats": ["json"],
            "positionals": [],
            "flags": [
                {"name": "--ch", "type": "choice", "choices": ["x", "y"], "repeatable": true},
                {"name": "--n", "type": "integer", "minimum": 5, "repeatable": true},
                {"name": "--m", "type": "integer", "repeatable": true},
                {"name": "--r", "type": "number", "minimum": 0.5, "repeatable": true},
                {"name": "--s", "type": "string", "repeatable": true},
                {"name": "--f", "type": "path", "repeatable": true},
                {"name": "--format", "type": "choice", "choices": ["json"], "output_format": true}
            ]
        }]);
        let c = catalog::parse(v.to_string().as_bytes()).unwrap();
        let (set, _) = tools::build(&c, false);
        let tool = set.get("lists").unwrap().clone();
        for (key, want) in [
            ("ch", "`ch` takes an array of values (each one of: x, y), e.g. [\"x\"]."),
            ("n", "`n` takes an array of values (each an integer), e.g. [5]."),
            ("m", "`m` takes an array of values (each an integer), e.g. [1]."),
            ("r", "`r` takes an array of values (each a number), e.g. [0.5]."),
            ("s", "`s` takes an array of values (each a string), e.g. [\"…\"]."),
            (
                "f",
                "`f` takes an array of values (each a file path inside the root folder), e.g. [\"…\"].",
            ),
        ] {
            let mut args = Map::new();
            args.insert(key.into(), json!("v"));
            let e = validate(&tool, &args).unwrap_err();
            assert_eq!(e.message(), want);
        }
    }
}
