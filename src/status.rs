//! One macro for the three vendors' status enums: a variant per code in the header, plus `Unrecognized(code)` so a code
//! from a newer release is kept, never undefined behaviour.

/// Declares a status enum.
///
/// `success` names the vendor's success code (for the generated `check`); `describe` is a `fn(&Self) -> String` giving the `Display` text (vendor name, then the vendor's message where its
/// library is loaded).
macro_rules! status_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $Name:ident: $repr:ty, from $sys:path, success $ok:ident, display $describe:path {
            $( $(#[$vmeta:meta])* $Variant:ident = $code:ident, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
        #[cfg_attr(feature = "serde", derive(serde::Serialize))]
        #[non_exhaustive]
        $vis enum $Name {
            $(
                $(#[$vmeta])*
                #[doc = concat!("`", stringify!($code), "`")]
                #[error("{}", $describe(self))]
                $Variant,
            )*
            /// A code this version of the crate does not know (for example from a newer vendor release).
            #[error("{}", $describe(self))]
            Unrecognized($repr),
        }

        impl $Name {
            /// Every known code, in header order.
            pub const ALL: &'static [$Name] = &[$($Name::$Variant,)*];

            /// The enum value for a vendor code; unknown codes are kept in [`Self::Unrecognized`].
            pub fn from_code(code: $repr) -> Self {
                use $sys as sys;
                match code {
                    $( c if c == sys::$code => $Name::$Variant, )*
                    other => $Name::Unrecognized(other),
                }
            }

            /// The vendor's numeric code.
            pub fn code(self) -> $repr {
                use $sys as sys;
                match self {
                    $( $Name::$Variant => sys::$code, )*
                    $Name::Unrecognized(c) => c,
                }
            }

            /// `Ok` for the vendor's success code, the typed error otherwise. A failure is logged at debug
            /// level with the place in the crate that made the call.
            #[track_caller]
            #[allow(dead_code)] // some vendors name every call (`check_call`)
            pub(crate) fn check(code: $repr) -> Result<(), Self> {
                use $sys as sys;
                if code == sys::$ok {
                    Ok(())
                } else {
                    let e = Self::from_code(code);
                    $crate::status::log_failure(
                        module_path!(),
                        $crate::status::Call::At(::std::panic::Location::caller()),
                        e.vendor_name(),
                        code,
                    );
                    Err(e)
                }
            }

            /// [`check`](Self::check) for a call the caller names: the log names the vendor function.
            #[allow(dead_code)] // some vendors' call sites do not name their calls
            pub(crate) fn check_call(call: &'static str, code: $repr) -> Result<(), Self> {
                use $sys as sys;
                if code == sys::$ok {
                    Ok(())
                } else {
                    let e = Self::from_code(code);
                    $crate::status::log_failure(
                        module_path!(),
                        $crate::status::Call::Named(call),
                        e.vendor_name(),
                        code,
                    );
                    Err(e)
                }
            }

            /// The vendor's name for the code (`None` for an unknown code).
            pub fn vendor_name(self) -> Option<&'static str> {
                match self {
                    $( $Name::$Variant => Some(stringify!($code)), )*
                    $Name::Unrecognized(_) => None,
                }
            }
        }

    };
}

pub(crate) use status_enum;

/// Which vendor call failed, for the log.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Call {
    /// The vendor function's name.
    Named(&'static str),
    /// The crate's call site, where the function is not named there.
    At(&'static std::panic::Location<'static>),
}

/// Logs a failed vendor call at debug level (the library never prints): the call, the vendor's name for the
/// code where it has one, and the code. Uses the vendor's static names only, so logging calls no vendor code.
pub(crate) fn log_failure(
    target: &str,
    call: Call,
    status: Option<&str>,
    code: impl std::fmt::Display,
) {
    let status = status.unwrap_or("unrecognized code");
    match call {
        Call::Named(name) => log::debug!(target: target, "{name} failed: {status} ({code})"),
        Call::At(at) => log::debug!(
            target: target,
            "vendor call at {}:{} failed: {status} ({code})",
            at.file(),
            at.line()
        ),
    }
}

/// `Display` text of a vendor status: its name, then the vendor's message where it adds something (not empty,
/// not a repeat of the name, trailing newlines dropped).
#[cfg(any(
    feature = "cupti",
    feature = "rocprofiler",
    feature = "rocprofiler-sdk"
))]
pub(crate) fn with_message(name: String, message: Option<String>) -> String {
    match message {
        Some(msg) => {
            let msg = msg.trim();
            if msg.is_empty() || name.starts_with(msg) {
                name
            } else {
                format!("{name}: {msg}")
            }
        }
        None => name,
    }
}

/// A vendor's "string for a code" lookup (`cuGetErrorName`, `cuptiGetResultString`, ...): the string it hands out
/// when it returns success (0) with a non-null pointer.
///
/// # Safety
/// `f` must be such a lookup: it writes nothing or a pointer to a NUL-terminated string that stays valid (a
/// static table), and returns 0 only when it wrote one.
#[cfg(any(feature = "cupti", feature = "cudbg"))]
pub(crate) unsafe fn code_string(
    f: unsafe extern "C" fn(u32, *mut *const std::ffi::c_char) -> u32,
    code: u32,
) -> Option<String> {
    let mut p = std::ptr::null();
    // SAFETY: a valid out-pointer; the function only looks the code up (the caller's contract).
    if unsafe { f(code, &mut p) } != 0 || p.is_null() {
        return None;
    }
    // SAFETY: on success the lookup handed out a static NUL-terminated string.
    Some(
        unsafe { std::ffi::CStr::from_ptr(p) }
            .to_string_lossy()
            .into_owned(),
    )
}
