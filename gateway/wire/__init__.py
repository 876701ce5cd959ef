"""Wire-format mechanisms every family shares, each in one module with its own tests:

* ``sse``: the incremental server-sent-events parser (any chunking, any line ends);
* ``data_url``: RFC 2397 ``data:`` URLs;
* ``decode``: JSON body -> msgspec Struct, with a 400 that names the offending field;
* ``media_url``: whether a client's media link is a public http(s) URL (no DNS), base64 sizes.
"""
