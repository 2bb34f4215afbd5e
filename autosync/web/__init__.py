"""autosync-web: the history page, served to this user's own browser on 127.0.0.1.

server.py is the program (the socket, the address file, the loop); app.py decides who
may ask and what is answered; folders.py reads what is shown; actions.py changes
things through the product's own commands and requests; templates.py is the page's
HTML, style and script.
"""
