# system1 as a container: a static binary on an empty image.
#
#   docker build -t system1 .
#   docker run -v $PWD/system1.yaml:/etc/system1/system1.yaml:ro -p 3000:3000 system1
#
# The configuration must listen on 0.0.0.0:3000 (listen: 0.0.0.0:3000) to be
# reached from outside the container. See docs/replicas.md.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN scripts/build-static.sh /out/system1 && mkdir /out/state

FROM scratch
# CA roots for HTTPS nodes (hosted System One endpoints).
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/
COPY --from=build /out/system1 /system1
# The state folder (SQLite decision log, refitted fits, pause switch): an
# empty image has nothing else its user can write, and with HOME=/ serve
# would exit at start failing to create /.local. XDG_STATE_HOME/system1
# is where serve and toggle look when no --state-dir is given.
COPY --from=build --chown=65532:65532 /out/state /var/lib/system1
ENV XDG_STATE_HOME=/var/lib
USER 65532:65532
EXPOSE 3000
ENTRYPOINT ["/system1"]
CMD ["serve", "--config", "/etc/system1/system1.yaml"]
