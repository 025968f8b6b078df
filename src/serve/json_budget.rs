//! How many JSON values a request body holds, counted before the body is built into a
//! `serde_json::Value`.
//!
//! A `Value` costs far more than the text it comes from: with `preserve_order` an empty object
//! `{}` (3 bytes with its comma) becomes a map of about 70 bytes, so a 4 MiB body of them grew to
//! +101 MiB while it was parsed (issue 30). Counting first walks the text with serde's visitor
//! and allocates nothing but the stack of open containers (bounded by serde_json's recursion
//! limit); a body over [`MAX_VALUES`], or over [`MAX_OBJECTS`] objects, is refused before
//! anything is built.
//!
//! Objects are counted apart because they are what costs: a one-member object is a map of
//! some hundreds of bytes once built (and built twice while the body is read into its types),
//! so 97,000 of them, the properties of 128 tools (2.7 MB), cost +116 MiB before anything was
//! compiled (issue 44 item 2), where 190,000 short strings cost +22 MiB.

use std::fmt;

use serde::Deserializer;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// Most JSON values (objects, arrays, strings, numbers, booleans, nulls, each counted once) a
/// request body may hold. A real request is far below it: 128 tools with large schemas and
/// 4,096 messages come to some tens of thousands.
pub(crate) const MAX_VALUES: usize = 200_000;
/// Most JSON objects a request body may hold (each also counted among [`MAX_VALUES`]): room for
/// the schemas serve compiles ([`crate::schema::MAX_SCHEMA_NODES`]) and thousands of messages.
pub(crate) const MAX_OBJECTS: usize = 40_000;

/// Why counting stopped.
#[derive(Debug)]
pub(crate) enum CountError {
    /// More values than the limit.
    TooMany,
    /// More objects than the limit.
    TooManyObjects,
    /// Not JSON (the parse that follows says where).
    Malformed,
}

/// Count the values of `bytes`, stopping at the first past `limit` values or `objects`
/// objects.
pub(crate) fn count_values(
    bytes: &[u8],
    limit: usize,
    objects: usize,
) -> Result<usize, CountError> {
    let mut left = Left {
        values: limit,
        objects,
    };
    let mut de = serde_json::Deserializer::from_slice(bytes);
    match (Counter { left: &mut left }).deserialize(&mut de) {
        Ok(()) => Ok(limit - left.values),
        Err(_) if left.values == 0 => Err(CountError::TooMany),
        Err(_) if left.objects == 0 => Err(CountError::TooManyObjects),
        Err(_) => Err(CountError::Malformed),
    }
}

/// What is left of the budget.
struct Left {
    values: usize,
    objects: usize,
}

/// One value to count, and what is left of the budget.
struct Counter<'a> {
    left: &'a mut Left,
}

impl Counter<'_> {
    /// Take one value from the budget; an error once it is spent (the message is not shown:
    /// [`count_values`] reads the budget).
    fn take<E: serde::de::Error>(&mut self) -> Result<(), E> {
        if self.left.values == 0 {
            return Err(E::custom("too many values"));
        }
        self.left.values -= 1;
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for Counter<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Counter<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: serde::de::Error>(mut self, _: bool) -> Result<(), E> {
        self.take()
    }
    fn visit_i64<E: serde::de::Error>(mut self, _: i64) -> Result<(), E> {
        self.take()
    }
    fn visit_u64<E: serde::de::Error>(mut self, _: u64) -> Result<(), E> {
        self.take()
    }
    fn visit_f64<E: serde::de::Error>(mut self, _: f64) -> Result<(), E> {
        self.take()
    }
    fn visit_str<E: serde::de::Error>(mut self, _: &str) -> Result<(), E> {
        self.take()
    }
    fn visit_unit<E: serde::de::Error>(mut self) -> Result<(), E> {
        self.take()
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        self.take()?;
        while seq
            .next_element_seed(Counter {
                left: &mut *self.left,
            })?
            .is_some()
        {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        self.take()?;
        if self.left.objects == 0 {
            return Err(serde::de::Error::custom("too many objects"));
        }
        self.left.objects -= 1;
        // A key is text the map holds anyway; its value is counted.
        while map.next_key::<IgnoredAny>()?.is_some() {
            map.next_value_seed(Counter {
                left: &mut *self.left,
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_is_counted_once() {
        let body = br#"{"a": [1, "x", null, true, {"b": {}}], "c": 2.5}"#;
        // The object, the array, 1, "x", null, true, {"b"}, {}, 2.5.
        assert_eq!(count_values(body, 100, 100).unwrap(), 9);
        assert_eq!(count_values(body, 9, 3).unwrap(), 9);
        assert!(matches!(count_values(body, 8, 3), Err(CountError::TooMany)));
        assert!(matches!(
            count_values(body, 9, 2),
            Err(CountError::TooManyObjects)
        ));
    }

    #[test]
    fn malformed_json_is_told_apart_from_too_much() {
        assert!(matches!(
            count_values(b"{\"a\": [1, 2", 100, 100),
            Err(CountError::Malformed)
        ));
    }
}
