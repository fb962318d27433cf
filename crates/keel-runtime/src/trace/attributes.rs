//! A span's attributes: a short list of static names and JSON values, in the order they were
//! set. Every name is a constant of the conventions (`gen_ai.*`, `keel.*`), so none is copied
//! per span; at a few dozen entries a scan beats hashing.

use std::ops::Index;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Attributes(Vec<(&'static str, Value)>);

impl Attributes {
    /// Sets `key` (replacing its value when it is set already).
    pub fn insert(&mut self, key: &'static str, value: impl Into<Value>) {
        let value = value.into();
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.0.push((key, value)),
        }
    }

    /// Sets `key` unless it is set.
    pub fn insert_absent(&mut self, key: &'static str, value: impl Into<Value>) {
        if !self.contains_key(key) {
            self.0.push((key, value.into()));
        }
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    pub fn remove(&mut self, key: &str) {
        self.0.retain(|(k, _)| *k != key);
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &Value)> {
        self.0.iter().map(|(k, v)| (*k, v))
    }
}

impl IntoIterator for Attributes {
    type Item = (&'static str, Value);
    type IntoIter = std::vec::IntoIter<(&'static str, Value)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<const N: usize> From<[(&'static str, Value); N]> for Attributes {
    fn from(pairs: [(&'static str, Value); N]) -> Self {
        let mut attributes = Self(Vec::with_capacity(N + 8));
        for (key, value) in pairs {
            attributes.insert(key, value);
        }
        attributes
    }
}

/// `attributes["name"]`: the value, or `null` when it is not set (as `serde_json::Value`
/// indexes).
impl Index<&str> for Attributes {
    type Output = Value;

    fn index(&self, key: &str) -> &Value {
        static NULL: Value = Value::Null;
        self.get(key).unwrap_or(&NULL)
    }
}

/// A JSON object, names in the order they were set.
impl Serialize for Attributes {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in &self.0 {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}
