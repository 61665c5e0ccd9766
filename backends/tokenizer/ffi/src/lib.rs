//! focus_tokenizer: a length-delimited C API over Hugging Face's `tokenizers` crate for
//! backends/tokenizer (cgo). The contract is focus_tokenizer.h beside Cargo.toml.
//!
//! Text crosses as (pointer, length) in both directions, never as a NUL-terminated C
//! string, so a NUL byte inside a prompt or a decoded token is ordinary data. Whatever Rust
//! allocates here is released by the free function of its kind. No call unwinds into C: a
//! panic is caught and returned as an error message.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::slice;

use tokenizers::Tokenizer;

/// The opaque tokenizer handle C holds.
pub struct FtkTokenizer {
    inner: Tokenizer,
}

/// Views a caller-owned buffer; NULL is accepted for an empty one.
///
/// # Safety
/// `p` must point to `n` readable elements when `n > 0`.
unsafe fn input<'a, T>(p: *const T, n: usize) -> &'a [T] {
    if p.is_null() || n == 0 {
        &[]
    } else {
        slice::from_raw_parts(p, n)
    }
}

/// Hands a byte vector to C as (pointer, length); freed with ftk_bytes_free.
///
/// # Safety
/// `out` and `out_len` must be writable when not NULL.
unsafe fn give_bytes(bytes: Vec<u8>, out: *mut *mut u8, out_len: *mut usize) {
    if out.is_null() || out_len.is_null() {
        return;
    }
    *out_len = bytes.len();
    *out = if bytes.is_empty() {
        ptr::null_mut()
    } else {
        Box::into_raw(bytes.into_boxed_slice()) as *mut u8
    };
}

/// Writes an error message to (err, err_len) and returns the failure status 1.
///
/// # Safety
/// As give_bytes.
unsafe fn fail(message: String, err: *mut *mut u8, err_len: *mut usize) -> i32 {
    give_bytes(message.into_bytes(), err, err_len);
    1
}

/// The text of a caught panic's payload.
fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    let what = if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    };
    format!("tokenizers panicked: {what}")
}

/// Runs body, turning an Err or a panic into (err, err_len) and status 1.
///
/// # Safety
/// As give_bytes.
unsafe fn guarded<F: FnOnce() -> Result<(), String>>(err: *mut *mut u8, err_len: *mut usize, body: F) -> i32 {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => 0,
        Ok(Err(message)) => fail(message, err, err_len),
        Err(payload) => fail(panic_message(payload), err, err_len),
    }
}

/// Parses tokenizer.json content.
///
/// # Safety
/// `json` must point to `len` readable bytes; `err` and `err_len` writable or NULL.
#[no_mangle]
pub unsafe extern "C" fn ftk_tokenizer_load(json: *const u8, len: usize, err: *mut *mut u8, err_len: *mut usize) -> *mut FtkTokenizer {
    let mut loaded: Option<Tokenizer> = None;
    let status = guarded(err, err_len, || {
        let data = input(json, len);
        loaded = Some(Tokenizer::from_bytes(data).map_err(|e| e.to_string())?);
        Ok(())
    });
    match (status, loaded) {
        (0, Some(inner)) => Box::into_raw(Box::new(FtkTokenizer { inner })),
        _ => ptr::null_mut(),
    }
}

/// Frees a tokenizer from ftk_tokenizer_load (NULL is ignored).
///
/// # Safety
/// `tk` must come from ftk_tokenizer_load and not be used afterwards.
#[no_mangle]
pub unsafe extern "C" fn ftk_tokenizer_free(tk: *mut FtkTokenizer) {
    if !tk.is_null() {
        drop(Box::from_raw(tk));
    }
}

/// The number of ids, added tokens included (0 for NULL).
///
/// # Safety
/// `tk` must be a live tokenizer or NULL.
#[no_mangle]
pub unsafe extern "C" fn ftk_vocab_size(tk: *const FtkTokenizer) -> usize {
    match tk.as_ref() {
        Some(tk) => catch_unwind(AssertUnwindSafe(|| tk.inner.get_vocab_size(true))).unwrap_or(0),
        None => 0,
    }
}

/// Encodes `len` bytes of UTF-8 text.
///
/// # Safety
/// `tk` a live tokenizer; `text` `len` readable bytes; the out pointers writable.
#[no_mangle]
pub unsafe extern "C" fn ftk_encode(
    tk: *const FtkTokenizer,
    text: *const u8,
    len: usize,
    add_special: i32,
    ids: *mut *mut u32,
    n: *mut usize,
    err: *mut *mut u8,
    err_len: *mut usize,
) -> i32 {
    guarded(err, err_len, || {
        let tk = tk.as_ref().ok_or("ftk_encode: tokenizer is NULL")?;
        if ids.is_null() || n.is_null() {
            return Err("ftk_encode: ids or n is NULL".into());
        }
        let text = std::str::from_utf8(input(text, len))
            .map_err(|e| format!("text is not valid UTF-8: {e}"))?;
        let encoding = tk.inner.encode(text, add_special != 0).map_err(|e| e.to_string())?;
        let out = encoding.get_ids().to_vec();
        *n = out.len();
        *ids = if out.is_empty() {
            ptr::null_mut()
        } else {
            Box::into_raw(out.into_boxed_slice()) as *mut u32
        };
        Ok(())
    })
}

/// Decodes `n` ids into UTF-8 text.
///
/// # Safety
/// `tk` a live tokenizer; `ids` `n` readable ids; the out pointers writable.
#[no_mangle]
pub unsafe extern "C" fn ftk_decode(
    tk: *const FtkTokenizer,
    ids: *const u32,
    n: usize,
    skip_special: i32,
    out: *mut *mut u8,
    out_len: *mut usize,
    err: *mut *mut u8,
    err_len: *mut usize,
) -> i32 {
    guarded(err, err_len, || {
        let tk = tk.as_ref().ok_or("ftk_decode: tokenizer is NULL")?;
        if out.is_null() || out_len.is_null() {
            return Err("ftk_decode: out or out_len is NULL".into());
        }
        let text = tk.inner.decode(input(ids, n), skip_special != 0).map_err(|e| e.to_string())?;
        give_bytes(text.into_bytes(), out, out_len);
        Ok(())
    })
}

/// Frees an id array from ftk_encode (NULL is ignored).
///
/// # Safety
/// `ids` and `n` must be exactly what ftk_encode returned.
#[no_mangle]
pub unsafe extern "C" fn ftk_ids_free(ids: *mut u32, n: usize) {
    if !ids.is_null() {
        drop(Box::from_raw(ptr::slice_from_raw_parts_mut(ids, n)));
    }
}

/// Frees text or an error message (NULL is ignored).
///
/// # Safety
/// `p` and `n` must be exactly what a call of this crate returned.
#[no_mangle]
pub unsafe extern "C" fn ftk_bytes_free(p: *mut u8, n: usize) {
    if !p.is_null() {
        drop(Box::from_raw(ptr::slice_from_raw_parts_mut(p, n)));
    }
}
