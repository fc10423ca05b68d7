//! Column values: each PostgreSQL type the store's schema uses, read as one of the four
//! [`Value`]s both backends share.

use ahp_store_sql::Value;
use postgres::types::{FromSql, Type};

/// A column's value, or why it has none of the four shapes.
pub(crate) struct Decoded(pub(crate) Result<Value, String>);

type BoxError = Box<dyn std::error::Error + Sync + Send>;

impl<'a> FromSql<'a> for Decoded {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
        Ok(Self(decode(ty, raw)))
    }

    fn from_sql_null(_: &Type) -> Result<Self, BoxError> {
        Ok(Self(Ok(Value::Null)))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

/// Reads one non-null value by its type:
///
/// - `INT2`, `INT4`, `INT8` → [`Value::Integer`];
/// - `BOOL` → [`Value::Integer`] 0 or 1 (as SQLite stores booleans);
/// - `NUMERIC` with no fractional part, within `i64` → [`Value::Integer`] (PostgreSQL's
///   `SUM(bigint)` is `NUMERIC`); any other `NUMERIC` is an error;
/// - `TEXT`, `VARCHAR`, `NAME`, `BPCHAR`, `JSON`, `JSONB` → [`Value::Text`];
/// - `BYTEA` → [`Value::Blob`];
/// - anything else is an error naming the type.
fn decode(ty: &Type, raw: &[u8]) -> Result<Value, String> {
    let wrong = |e: BoxError| format!("malformed {}: {e}", ty.name());
    match *ty {
        Type::INT2 => i16::from_sql(ty, raw).map(|i| Value::Integer(i.into())).map_err(wrong),
        Type::INT4 => i32::from_sql(ty, raw).map(|i| Value::Integer(i.into())).map_err(wrong),
        Type::INT8 => i64::from_sql(ty, raw).map(Value::Integer).map_err(wrong),
        Type::BOOL => bool::from_sql(ty, raw).map(|b| Value::Integer(b.into())).map_err(wrong),
        Type::NUMERIC => decode_numeric(raw).map(Value::Integer),
        Type::TEXT | Type::VARCHAR | Type::NAME | Type::BPCHAR | Type::JSON => String::from_utf8(raw.to_vec())
            .map(Value::Text)
            .map_err(|e| wrong(Box::new(e))),
        Type::JSONB => match raw.split_first() {
            Some((1, text)) => String::from_utf8(text.to_vec())
                .map(Value::Text)
                .map_err(|e| wrong(Box::new(e))),
            _ => Err("malformed jsonb: unknown version".to_owned()),
        },
        Type::BYTEA => Ok(Value::Blob(raw.to_vec())),
        _ => Err(format!(
            "PostgreSQL type {} has no store value (integer, text, blob or null): cast it in the query",
            ty.name()
        )),
    }
}

/// An integral `NUMERIC` as an `i64`: header (digit count, weight, sign, display scale), then
/// base-10000 digits, most significant first; digit `k` is worth `10000^(weight - k)`.
pub(crate) fn decode_numeric(raw: &[u8]) -> Result<i64, String> {
    let word = |at: usize| -> Result<u16, String> {
        raw.get(at..at + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
            .ok_or_else(|| "malformed numeric: truncated".to_owned())
    };
    let count = usize::from(word(0)?);
    let weight = i64::from(word(2)?.cast_signed());
    let sign = word(4)?;
    let negative = match sign {
        0x0000 => false,
        0x4000 => true,
        0xC000 => return Err("numeric NaN is not an integer".to_owned()),
        _ => return Err("numeric infinity is not an integer".to_owned()),
    };
    if raw.len() != 8 + 2 * count {
        return Err("malformed numeric: wrong length".to_owned());
    }
    let mut value: i128 = 0;
    for k in 0..count {
        let digit = i128::from(word(8 + 2 * k)?);
        if digit >= 10_000 {
            return Err("malformed numeric: digit out of range".to_owned());
        }
        if digit == 0 {
            continue;
        }
        let position = weight - i64::try_from(k).unwrap_or(i64::MAX);
        if position < 0 {
            return Err("numeric with a fractional part is not an integer".to_owned());
        }
        // 10000^5 > i64::MAX: a digit that far up is out of range however small.
        if position > 4 {
            return Err("numeric out of range for a 64-bit integer".to_owned());
        }
        let place = 10_000_i128.pow(u32::try_from(position).unwrap_or(0));
        value += digit * place;
    }
    let value = if negative { -value } else { value };
    i64::try_from(value).map_err(|_| format!("numeric {value} is out of range for a 64-bit integer"))
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;

    use super::decode_numeric;
    use crate::bind::encode_numeric;

    #[test]
    fn integral_numerics_round_trip() {
        for x in [
            0,
            1,
            -1,
            9_999,
            10_000,
            10_001,
            100_000_000,
            -123_456_789_012_345,
            i64::MAX,
            i64::MIN,
        ] {
            let mut out = BytesMut::new();
            encode_numeric(x, &mut out);
            assert_eq!(decode_numeric(&out), Ok(x), "{x}");
        }
    }

    #[test]
    fn fractions_nan_and_overflow_are_refused() {
        // 1.5: two digits (1, 5000), weight 0, positive, scale 1.
        let one_and_a_half = [0, 2, 0, 0, 0, 0, 0, 1, 0, 1, 0x13, 0x88];
        assert!(decode_numeric(&one_and_a_half).unwrap_err().contains("fractional"));
        // 2.0000 (a zero fractional digit) is an integer.
        assert_eq!(decode_numeric(&[0, 2, 0, 0, 0, 0, 0, 4, 0, 2, 0, 0]), Ok(2));
        assert!(
            decode_numeric(&[0, 0, 0, 0, 0xC0, 0, 0, 0])
                .unwrap_err()
                .contains("NaN")
        );
        // 1 × 10000^5: past i64 whatever the digit.
        assert!(
            decode_numeric(&[0, 1, 0, 5, 0, 0, 0, 0, 0, 1])
                .unwrap_err()
                .contains("out of range")
        );
        assert!(decode_numeric(&[0, 1, 0, 0]).unwrap_err().contains("truncated"));
        assert!(
            decode_numeric(&[0, 2, 0, 0, 0, 0, 0, 0, 0, 1])
                .unwrap_err()
                .contains("length")
        );
    }
}
