//! Mutations of valid payloads: JSON-aware ones of the PoRep C1 output
//! (array lengths, numbers, strings, missing keys, wrong types) and
//! byte-level ones of bincode vanilla proofs (flips, length fields, cuts,
//! insertions), each driven by a list of `Op`s proptest draws and shrinks.

use base64::Engine as _;
use proptest::prelude::*;
use serde_json::Value;

/// One mutation: what to do (`what`), where (`at`) and with what (`arg`).
#[derive(Clone, Debug)]
pub struct Op {
    pub what: u8,
    pub at: u64,
    pub arg: u64,
}

pub fn ops(max: usize) -> impl Strategy<Value = Vec<Op>> {
    let arg = prop_oneof![0u64..4, Just(u32::MAX as u64), Just(u64::MAX), Just(1 << 40), any::<u64>()];
    proptest::collection::vec((any::<u8>(), any::<u64>(), arg).prop_map(|(what, at, arg)| Op { what, at, arg }), 1..=max)
}

/// Every JSON pointer in `v`, arrays first in a second list (the lengths
/// of challenges and paths are what mutations should hit most).
fn pointers(v: &Value, at: String, all: &mut Vec<String>, arrays: &mut Vec<String>) {
    match v {
        Value::Array(items) => {
            arrays.push(at.clone());
            for (i, x) in items.iter().enumerate() {
                pointers(x, format!("{at}/{i}"), all, arrays);
            }
        }
        Value::Object(m) => {
            for (k, x) in m {
                pointers(x, format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")), all, arrays);
            }
        }
        _ => {}
    }
    all.push(at);
}

fn number(arg: u64) -> Value {
    match arg % 5 {
        0 => Value::from(arg),
        1 => Value::from(-(arg as i64).abs() - 1),
        2 => Value::from(256),
        3 => serde_json::Number::from_f64(arg as f64 * 1.5).map_or(Value::Null, Value::Number),
        _ => Value::from(u64::MAX),
    }
}

/// Applies `op` to the JSON value `root`.
pub fn json(root: &mut Value, op: &Op) {
    let (mut all, mut arrays) = (Vec::new(), Vec::new());
    pointers(root, String::new(), &mut all, &mut arrays);
    let on_array = op.what.is_multiple_of(2) && !arrays.is_empty();
    let list = if on_array { &arrays } else { &all };
    let ptr = list[(op.at % list.len() as u64) as usize].clone();
    let Some(node) = root.pointer_mut(&ptr) else { return };
    let arg = op.arg;
    match (node, op.what / 2 % 6) {
        (Value::Array(items), 0) => items.truncate((arg % (items.len() as u64 + 1)) as usize),
        (Value::Array(items), 1) if !items.is_empty() => {
            let i = (arg % items.len() as u64) as usize;
            items.remove(i);
        }
        (Value::Array(items), 2) if !items.is_empty() => {
            let i = (arg % items.len() as u64) as usize;
            let copy = items[i].clone();
            items.insert(i, copy);
        }
        (Value::Array(items), 3) => items.push(number(arg)),
        (Value::Object(m), 0 | 1) if !m.is_empty() => {
            let k = m.keys().nth((arg % m.len() as u64) as usize).cloned().expect("in range");
            m.remove(&k);
        }
        (Value::String(s), 0 | 1) => {
            let cut = (arg % (s.len() as u64 + 1)) as usize;
            *s = s.chars().take(cut).collect();
        }
        (node, 4) => *node = number(arg),
        (node, 5) => {
            *node = match arg % 4 {
                0 => Value::Null,
                1 => Value::String("x".repeat((arg % 70) as usize)),
                2 => Value::Array(Vec::new()),
                _ => Value::Object(Default::default()),
            }
        }
        (node, _) => *node = number(arg),
    }
}

/// `edit(envelope, c1)` on a PoRep envelope and the C1 output inside it
/// (`Phase1Out`: base64 of the JSON), put back together.
fn edit_envelope(envelope: &[u8], edit: impl FnOnce(&mut Value, &mut Value)) -> Vec<u8> {
    let mut env: Value = serde_json::from_slice(envelope).expect("a valid envelope");
    let b64 = base64::engine::general_purpose::STANDARD;
    let inner = b64.decode(env["Phase1Out"].as_str().expect("Phase1Out")).expect("base64");
    let mut c1: Value = serde_json::from_slice(&inner).expect("C1 JSON");
    edit(&mut env, &mut c1);
    if env.get("Phase1Out").is_some_and(|p| p.is_string()) {
        env["Phase1Out"] = Value::String(b64.encode(serde_json::to_vec(&c1).expect("serializable")));
    }
    serde_json::to_vec(&env).expect("serializable")
}

/// Applies `ops` to the C1 output inside a PoRep envelope; every other op
/// mutates the envelope itself.
pub fn porep_envelope(envelope: &[u8], ops: &[Op]) -> Vec<u8> {
    edit_envelope(envelope, |env, c1| {
        for op in ops {
            json(if op.what % 7 == 6 { &mut *env } else { &mut *c1 }, op);
        }
    })
}

/// Applies `op` to bincode bytes.
pub fn bytes(b: &mut Vec<u8>, op: &Op) {
    let at = if b.is_empty() { 0 } else { (op.at % b.len() as u64) as usize };
    let arg = op.arg;
    match op.what % 6 {
        // A length prefix (bincode: u64 little-endian) made hostile.
        0 if b.len() >= at + 8 => b[at..at + 8].copy_from_slice(&arg.to_le_bytes()),
        1 => b.truncate(at),
        2 => {
            let n = (arg % 64) as usize;
            b.splice(at..at, (0..n).map(|i| (arg >> (i % 8)) as u8));
        }
        3 => {
            let end = (at + (arg % 256) as usize).min(b.len());
            b.drain(at..end);
        }
        _ if !b.is_empty() => b[at] ^= (arg as u8).max(1),
        _ => b.push(arg as u8),
    }
}

/// Applies `ops` to a list of vanilla proofs: the list itself (drop,
/// duplicate, empty) or one proof's bytes.
pub fn proofs(list: &mut Vec<Vec<u8>>, ops: &[Op]) {
    for op in ops {
        match op.what % 11 {
            9 if !list.is_empty() => {
                list.remove((op.at % list.len() as u64) as usize);
            }
            10 if !list.is_empty() => {
                let copy = list[(op.at % list.len() as u64) as usize].clone();
                list.push(copy);
            }
            _ if !list.is_empty() => {
                let n = list.len() as u64;
                bytes(&mut list[(op.arg % n) as usize], op);
            }
            _ => list.push(Vec::new()),
        }
    }
}

/// Applies `op` as a value change that keeps the JSON's shape: one number
/// leaf gets another number of its own range (a byte stays a byte), so the
/// C1 output still decodes and the wrong value reaches synthesis.
pub fn json_value(root: &mut Value, op: &Op) {
    let (mut all, mut arrays) = (Vec::new(), Vec::new());
    pointers(root, String::new(), &mut all, &mut arrays);
    let numbers: Vec<&String> = all.iter().filter(|p| root.pointer(p).is_some_and(Value::is_u64)).collect();
    if numbers.is_empty() {
        return;
    }
    let ptr = numbers[(op.at % numbers.len() as u64) as usize].clone();
    let node = root.pointer_mut(&ptr).expect("a pointer of this value");
    let old = node.as_u64().expect("a number leaf");
    let new = match (old <= 255, op.what % 3) {
        (true, 0) => old ^ (1 << (op.arg % 8)),
        (true, _) => op.arg % 256,
        (false, 0) => old ^ (1 << (op.arg % 64)),
        (false, 1) => old.wrapping_add(1 + op.arg % 4),
        (false, _) => op.arg,
    };
    *node = Value::from(new);
}

/// Applies `ops` to the C1 output inside a PoRep envelope, three in four
/// as [`json_value`] changes (the rest as [`json`] ones: lengths, types).
pub fn porep_values(envelope: &[u8], ops: &[Op]) -> Vec<u8> {
    edit_envelope(envelope, |_, c1| {
        for op in ops {
            if op.what % 4 == 3 {
                json(c1, op);
            } else {
                json_value(c1, op);
            }
        }
    })
}
