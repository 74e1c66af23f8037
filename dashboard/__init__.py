"""The Streamlit privacy-utility leaderboard (``bench dashboard``)."""
