//! Profile images (20 §1.5, 30 §1.1): an http(s) URL (servers only) or a base64 image.

use base64::Engine;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageError {
    /// Empty or longer than 1,000,000 characters: a schema violation.
    Size,
    /// Neither an accepted URL nor a base64 image (or a URL from a client).
    Invalid,
}

fn is_base64_image(v: &str) -> bool {
    let data = match v.strip_prefix("data:image/") {
        Some(rest) => {
            let Some((kind, data)) = rest.split_once(";base64,") else {
                return false;
            };
            if !["png", "jpg", "jpeg", "gif", "bmp", "webp"].contains(&kind) {
                return false;
            }
            data
        }
        None => v,
    };
    !data.is_empty()
        && base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .is_ok()
}

/// Checks a profile image value as a client (`from_client`) or a server sends it.
pub fn check(value: &str, from_client: bool) -> Result<(), ImageError> {
    if value.is_empty() || value.chars().count() > 1_000_000 {
        return Err(ImageError::Size);
    }
    let is_url = !value.contains(' ')
        && url::Url::parse(value).is_ok_and(|u| matches!(u.scheme(), "http" | "https"));
    match (is_url, from_client) {
        (true, false) => Ok(()),
        (true, true) => Err(ImageError::Invalid),
        (false, _) if is_base64_image(value) => Ok(()),
        _ => Err(ImageError::Invalid),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_for_servers_base64_for_all() {
        assert_eq!(check("https://x.example/a.png", false), Ok(()));
        assert_eq!(
            check("https://x.example/a.png", true),
            Err(ImageError::Invalid)
        );
        assert_eq!(check("data:image/png;base64,aGVsbG8=", true), Ok(()));
        assert_eq!(
            check("data:image/tiff;base64,aGVsbG8=", false),
            Err(ImageError::Invalid)
        );
        assert_eq!(check("", false), Err(ImageError::Size));
    }
}
