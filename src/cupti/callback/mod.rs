//! The CUPTI Callback API: a closure called on entry to and exit from driver and runtime API functions, and on
//! resource (context, stream, module) and synchronisation events.
//!
//! A [`Subscriber`] is the process's one subscription (CUPTI allows one); it enables callbacks per domain or per
//! callback id, and each call reaches the closure as a typed [`CallbackEvent`]. An API event's
//! [`correlation_id`](ApiEvent::correlation_id) is the id the activity records of that call carry, which ties a
//! kernel or copy to the call that issued it.

mod event;
mod params;
mod subscriber;

pub use event::{
    ApiEvent, ApiSite, CallbackDomain, CallbackEvent, GraphInfo, ModuleInfo, ResourceEvent,
    ResourceKind, SyncEvent,
};
pub use params::{CaptureCall, SyncCall};
pub use subscriber::{Subscriber, SubscriberBuilder, SubscriberStats, finalize_at_api_exit};
