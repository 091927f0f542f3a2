//! Canonical JSON for digests: the bytes `serde_json::to_vec` writes for a
//! value turned into a `serde_json::Value` whose objects have their keys in
//! sorted order — written straight from the value's `Serialize`.
//!
//! Building that `Value` (and its sorted copy) took 10 to 50 times the size
//! of the JSON: a plan's fingerprint was most of the memory a front end
//! used on a large file. Here only objects are held, as their members'
//! bytes, until their keys can be sorted; arrays and scalars go straight
//! out. The bytes are the same as before, so fingerprints stored in
//! sessions stay valid (a unit test compares the two on a value of every
//! serde shape).
//!
//! What it is not: a general JSON writer. Leaves are written as
//! `serde_json` writes the `Value` they become, which is all a digest needs.

use std::fmt::Display;

use serde::ser::{self, Serialize};

/// Why a value could not be written (a map key that is not a string, a
/// custom `Serialize` that failed).
#[derive(Debug)]
pub struct Error(String);

impl Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl ser::Error for Error {
    fn custom<T: Display>(msg: T) -> Error {
        Error(msg.to_string())
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Error {
        Error(e.to_string())
    }
}

/// `value` as canonical JSON, without the top-level object members named in
/// `skip`.
pub fn to_vec<T: Serialize + ?Sized>(value: &T, skip: &[&str]) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    value.serialize(Canonical {
        out: &mut out,
        skip,
    })?;
    Ok(out)
}

/// Writes one value onto `out`.
struct Canonical<'a> {
    out: &'a mut Vec<u8>,
    /// Members left out of the object this serializer writes (top level
    /// only).
    skip: &'a [&'a str],
}

impl Canonical<'_> {
    /// A scalar, as `serde_json` writes the `Value` it becomes.
    fn leaf<T: Serialize + ?Sized>(self, v: &T) -> Result<(), Error> {
        let v = serde_json::to_value(v)?;
        serde_json::to_writer(&mut *self.out, &v)?;
        Ok(())
    }
}

/// Members of an object, each key with its value's bytes, sorted when the
/// object ends.
struct Object<'a> {
    out: &'a mut Vec<u8>,
    skip: &'a [&'a str],
    members: Vec<(String, Vec<u8>)>,
    /// A map's key, waiting for its value.
    key: Option<String>,
    /// `{"variant": …}` around the object (struct variants).
    variant: Option<&'static str>,
}

impl Object<'_> {
    fn member<T: Serialize + ?Sized>(&mut self, key: String, value: &T) -> Result<(), Error> {
        if self.skip.contains(&key.as_str()) {
            return Ok(());
        }
        let mut bytes = Vec::new();
        value.serialize(Canonical {
            out: &mut bytes,
            skip: &[],
        })?;
        self.members.push((key, bytes));
        Ok(())
    }

    fn finish(mut self) -> Result<(), Error> {
        // `Value`'s map keeps the last value of a repeated key.
        self.members.reverse();
        self.members.sort_by(|a, b| a.0.cmp(&b.0));
        self.members.dedup_by(|a, b| a.0 == b.0);
        if let Some(v) = self.variant {
            self.out.push(b'{');
            serde_json::to_writer(&mut *self.out, v)?;
            self.out.push(b':');
        }
        self.out.push(b'{');
        // Each member's bytes are freed once copied: the object is held
        // once, not twice, while it is written out.
        for (i, (k, v)) in self.members.drain(..).enumerate() {
            if i > 0 {
                self.out.push(b',');
            }
            serde_json::to_writer(&mut *self.out, &k)?;
            self.out.push(b':');
            self.out.extend_from_slice(&v);
        }
        self.out.push(b'}');
        if self.variant.is_some() {
            self.out.push(b'}');
        }
        Ok(())
    }
}

/// Elements of an array, written as they come.
struct Array<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
    /// `{"variant": …}` around the array (tuple variants).
    variant: bool,
}

impl Array<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        value.serialize(Canonical {
            out: &mut *self.out,
            skip: &[],
        })
    }

    fn finish(self) -> Result<(), Error> {
        self.out.push(b']');
        if self.variant {
            self.out.push(b'}');
        }
        Ok(())
    }
}

impl<'a> ser::Serializer for Canonical<'a> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Array<'a>;
    type SerializeTuple = Array<'a>;
    type SerializeTupleStruct = Array<'a>;
    type SerializeTupleVariant = Array<'a>;
    type SerializeMap = Object<'a>;
    type SerializeStruct = Object<'a>;
    type SerializeStructVariant = Object<'a>;

    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.leaf(&v)
    }
    fn serialize_i8(self, v: i8) -> Result<(), Error> {
        self.leaf(&v)
    }
    fn serialize_i16(self, v: i16) -> Result<(), Error> {
        self.leaf(&v)
    }
    fn serialize_i32(self, v: i32) -> Result<(), Error> {
        self.leaf(&v)
    }
    fn serialize_i64(self, v: i64) -> Result<(), Error> {
        self.leaf(&v)
    }
    fn serialize_i128(self, v: i128) -> Result<(), Error> {
        self.leaf(&v)
    }
    fn serialize_u8(self, v: u8) -> Result<(), Error> {
        self.leaf(&v)
    }
    fn serialize_u16(self, v: u16) -> Result<(), Error> {
        self.leaf(&v)
    }
    fn serialize_u32(self, v: u32) -> Result<(), Error> {
        self.leaf(&v)
    }
    fn serialize_u64(self, v: u64) -> Result<(), Error> {
        self.leaf(&v)
    }
    fn serialize_u128(self, v: u128) -> Result<(), Error> {
        self.leaf(&v)
    }
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        self.leaf(&v)
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        self.leaf(&v)
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        self.leaf(&v)
    }
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        serde_json::to_writer(&mut *self.out, v)?;
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        self.leaf(v)
    }
    fn serialize_none(self) -> Result<(), Error> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        self.serialize_none()
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Error> {
        self.serialize_none()
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.out.push(b'{');
        serde_json::to_writer(&mut *self.out, variant)?;
        self.out.push(b':');
        value.serialize(Canonical {
            out: &mut *self.out,
            skip: &[],
        })?;
        self.out.push(b'}');
        Ok(())
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Array<'a>, Error> {
        self.out.push(b'[');
        Ok(Array {
            out: self.out,
            first: true,
            variant: false,
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<Array<'a>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<Array<'a>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Array<'a>, Error> {
        self.out.push(b'{');
        serde_json::to_writer(&mut *self.out, variant)?;
        self.out.extend_from_slice(b":[");
        Ok(Array {
            out: self.out,
            first: true,
            variant: true,
        })
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Object<'a>, Error> {
        Ok(Object {
            out: self.out,
            skip: self.skip,
            members: Vec::new(),
            key: None,
            variant: None,
        })
    }
    fn serialize_struct(self, _: &'static str, len: usize) -> Result<Object<'a>, Error> {
        self.serialize_map(Some(len))
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Object<'a>, Error> {
        let mut o = self.serialize_map(Some(len))?;
        o.skip = &[];
        o.variant = Some(variant);
        Ok(o)
    }
}

impl ser::SerializeSeq for Array<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.element(value)
    }
    fn end(self) -> Result<(), Error> {
        self.finish()
    }
}

impl ser::SerializeTuple for Array<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.element(value)
    }
    fn end(self) -> Result<(), Error> {
        self.finish()
    }
}

impl ser::SerializeTupleStruct for Array<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.element(value)
    }
    fn end(self) -> Result<(), Error> {
        self.finish()
    }
}

impl ser::SerializeTupleVariant for Array<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.element(value)
    }
    fn end(self) -> Result<(), Error> {
        self.finish()
    }
}

impl ser::SerializeMap for Object<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        // As `serde_json` turns a map key into an object key.
        let k = match serde_json::to_value(key)? {
            serde_json::Value::String(s) => s,
            serde_json::Value::Bool(b) => b.to_string(),
            serde_json::Value::Number(n) => n.to_string(),
            _ => return Err(Error("key must be a string".to_owned())),
        };
        self.key = Some(k);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        let key = self
            .key
            .take()
            .ok_or_else(|| Error("a map value without its key".to_owned()))?;
        self.member(key, value)
    }
    fn end(self) -> Result<(), Error> {
        self.finish()
    }
}

impl ser::SerializeStruct for Object<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.member(key.to_owned(), value)
    }
    fn end(self) -> Result<(), Error> {
        self.finish()
    }
}

impl ser::SerializeStructVariant for Object<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.member(key.to_owned(), value)
    }
    fn end(self) -> Result<(), Error> {
        self.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Serialize;
    use serde_json::json;
    use std::collections::{BTreeMap, HashMap};

    /// The bytes of the old way: a `Value`, sorted, written.
    fn by_value<T: Serialize>(v: &T, skip: &[&str]) -> Vec<u8> {
        fn sorted(v: &serde_json::Value) -> serde_json::Value {
            match v {
                serde_json::Value::Object(m) => {
                    let mut keys: Vec<&String> = m.keys().collect();
                    keys.sort();
                    serde_json::Value::Object(
                        keys.into_iter()
                            .map(|k| (k.clone(), sorted(&m[k])))
                            .collect(),
                    )
                }
                serde_json::Value::Array(a) => {
                    serde_json::Value::Array(a.iter().map(sorted).collect())
                }
                other => other.clone(),
            }
        }
        let mut v = serde_json::to_value(v).unwrap();
        if let Some(o) = v.as_object_mut() {
            for k in skip {
                o.remove(*k);
            }
        }
        serde_json::to_vec(&sorted(&v)).unwrap()
    }

    #[derive(Serialize)]
    #[serde(tag = "kind", rename_all = "snake_case")]
    enum Tagged {
        A { z: u8, a: Vec<f32> },
        B,
    }

    #[derive(Serialize)]
    enum External {
        Unit,
        New(i64),
        Tuple(u8, String),
        Struct { y: Option<bool>, x: char },
    }

    #[derive(Serialize)]
    struct Sample {
        zeta: String,
        alpha: Option<u32>,
        map: BTreeMap<String, serde_json::Value>,
        hash: HashMap<u32, bool>,
        tagged: Vec<Tagged>,
        external: Vec<External>,
        #[serde(flatten)]
        rest: BTreeMap<String, f64>,
        bytes: (u8, i128, f64),
        path: String,
    }

    #[test]
    fn the_bytes_are_those_of_a_sorted_value() {
        let s = Sample {
            zeta: "z\"\n\u{1}é".into(),
            alpha: None,
            map: [
                (
                    "b".to_owned(),
                    json!({"y": [1, {"d": 2, "c": null}], "x": 1.5}),
                ),
                ("a".to_owned(), json!("s")),
            ]
            .into(),
            hash: [(3, true), (10, false), (2, true)].into(),
            tagged: vec![
                Tagged::A {
                    z: 1,
                    a: vec![0.1, f32::NAN],
                },
                Tagged::B,
            ],
            external: vec![
                External::Unit,
                External::New(-3),
                External::Tuple(1, "t".into()),
                External::Struct {
                    y: Some(true),
                    x: 'c',
                },
            ],
            rest: [("m".to_owned(), 1e300), ("aa".to_owned(), -0.0)].into(),
            bytes: (255, -5, 2.5),
            path: "here".into(),
        };
        assert_eq!(
            String::from_utf8(to_vec(&s, &[]).unwrap()).unwrap(),
            String::from_utf8(by_value(&s, &[])).unwrap()
        );
        assert_eq!(
            to_vec(&s, &["path", "zeta"]).unwrap(),
            by_value(&s, &["path", "zeta"])
        );
    }
}
