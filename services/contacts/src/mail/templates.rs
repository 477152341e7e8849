//! The e-mail templates (80 §4), plain text and HTML. Variables are substituted as `{name}`;
//! values are HTML-escaped in the HTML part.

use std::collections::HashMap;

pub struct Rendered {
    pub subject: String,
    pub text: String,
    pub html: String,
}

struct Template {
    subject: &'static str,
    text: &'static str,
    html: &'static str,
}

fn template(name: &str) -> Option<Template> {
    Some(match name {
        "email_verification" => Template {
            subject: "Verify your e-mail address for {project}",
            text: "Confirm that {email} is your address by opening this link:\n\n{link}\n\nIf you did not ask for this, ignore this message.\n",
            html: "<p>Confirm that <b>{email}</b> is your address:</p><p><a href=\"{link}\">Verify e-mail</a></p><p>If you did not ask for this, ignore this message.</p>",
        },
        "password_reset" => Template {
            subject: "Reset your password for {project}",
            text: "Someone asked to reset the password of {email}. Choose a new one here:\n\n{link}\n\nIf it was not you, ignore this message; your password stays as it is.\n",
            html: "<p>Someone asked to reset the password of <b>{email}</b>.</p><p><a href=\"{link}\">Choose a new password</a></p><p>If it was not you, ignore this message.</p>",
        },
        "otp_sign_in" => Template {
            subject: "Your sign-in code for {project}: {otp}",
            text: "Your sign-in code is {otp}.\n\nOr sign in with this link:\n\n{link}\n",
            html: "<p>Your sign-in code is <b>{otp}</b>.</p><p>Or <a href=\"{link}\">sign in with this link</a>.</p>",
        },
        "team_invitation" => Template {
            subject: "You are invited to join {team} on {project}",
            text: "You have been invited to join {team}. Accept here:\n\n{link}\n",
            html: "<p>You have been invited to join <b>{team}</b>.</p><p><a href=\"{link}\">Accept the invitation</a></p>",
        },
        "test" => Template {
            subject: "Test mail from {project}",
            text: "This is a test message from {project}. Mail from this project reaches {email}.\n",
            html: "<p>This is a test message from <b>{project}</b>.</p><p>Mail from this project reaches <b>{email}</b>.</p>",
        },
        _ => return None,
    })
}

fn escape_html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn fill(text: &str, vars: &HashMap<String, String>, escape: bool) -> String {
    let mut out = text.to_owned();
    for (k, v) in vars {
        let v = if escape { escape_html(v) } else { v.clone() };
        out = out.replace(&format!("{{{k}}}"), &v);
    }
    out
}

/// Renders a template; `None` for an unknown template name.
pub fn render(name: &str, vars: &HashMap<String, String>) -> Option<Rendered> {
    let t = template(name)?;
    Some(Rendered {
        subject: fill(t.subject, vars, false),
        text: fill(t.text, vars, false),
        html: fill(t.html, vars, true),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_and_escapes() {
        let vars: HashMap<String, String> = [
            ("email", "a@b.co"),
            ("link", "https://x/?a=1&code=c"),
            ("project", "P<1>"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let r = render("password_reset", &vars).unwrap_or_else(|| panic!("template"));
        assert_eq!(r.subject, "Reset your password for P<1>");
        assert!(r.text.contains("https://x/?a=1&code=c"));
        assert!(r.html.contains("https://x/?a=1&amp;code=c"));
        assert!(render("nope", &vars).is_none());
    }
}
