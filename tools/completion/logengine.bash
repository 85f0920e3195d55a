# bash completion for logengine(1).
# Installed by `make install` as
#   $(DESTDIR)$(PREFIX)/share/bash-completion/completions/logengine
# (loaded on demand by bash-completion); or: source it from ~/.bashrc.

_logengine_dirs()
{
	local IFS=$'\n'
	COMPREPLY=($(compgen -d -- "$1"))
	compopt -o filenames 2>/dev/null
}

_logengine_files()
{
	local IFS=$'\n'
	COMPREPLY=($(compgen -f -- "$1"))
	compopt -o filenames 2>/dev/null
}

# The shard numbers of the log directory named on the command line.
_logengine_shards()
{
	local w d
	for w in "${COMP_WORDS[@]:2}"; do
		[[ -d $w ]] && d=$w && break
	done
	[[ -n $d ]] || return
	local s out=()
	for s in "$d"/shard-[0-9][0-9][0-9]; do
		[[ -d $s ]] && out+=($((10#${s##*shard-})))
	done
	COMPREPLY=($(compgen -W "${out[*]}" -- "$1"))
}

# forward, collect and serve: their options, what follows each that takes
# a value, and directories for the rest.
_logengine_shipping()
{
	local cmd=$1 prev=$2 cur=$3
	local tls="--tls --tls-ca --tls-cert --tls-key"
	local auth="--creds --user --password-file"
	local o
	case $cmd in
	forward)
		o="--nats --stream --subject --host $auth $tls --max-batch-bytes
			--max-inflight-bytes --max-record-bytes --ack-wait-ms
			--replicas --once --verbose" ;;
	collect)
		o="--nats --stream --subject --durable $auth $tls --sync
			--segment-bytes --max-origins --fetch-bytes --ack-wait-ms
			--gap-wait-ms --dead-letter --dead-letter-stream
			--dead-letter-bytes --once --outage-deadline-ms --verbose" ;;
	serve)
		o="--listen --listen-any --max-clients --max-connections
			--max-per-ip --request-timeout --tls-cert --tls-key
			--basic-auth-file" ;;
	esac
	case $prev in
	--creds | --password-file | --tls-ca | --tls-cert | --tls-key | \
	--basic-auth-file)
		_logengine_files "$cur"
		return ;;
	--sync)
		COMPREPLY=($(compgen -W "batch none" -- "$cur"))
		return ;;
	--nats | --stream | --subject | --host | --user | --durable | \
	--listen | --dead-letter | --dead-letter-stream | --replicas | \
	--max-* | --*-bytes | --*-ms | --request-timeout)
		return ;;
	esac
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$o -h --help" -- "$cur"))
	else
		_logengine_dirs "$cur"
	fi
}

_logengine()
{
	local cur prev cmd
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD-1]}
	cmd=${COMP_WORDS[1]}

	if ((COMP_CWORD == 1)); then
		COMPREPLY=($(compgen -W "cat tail verify stats vacuum recover
			capture forward collect serve help --help --version" \
			-- "$cur"))
		return
	fi

	local formats="short short-precise short-iso short-iso-precise
		short-unix text json json-pretty cat raw verbose export"
	local levels="trace debug info notice warn warning err error crit
		alert emerg fatal"
	local modes="tolerate absolute point skip"

	case $cmd in
	cat | tail)
		case $prev in
		-o | --output)
			COMPREPLY=($(compgen -W "$formats" -- "$cur"))
			return ;;
		-p | --priority)
			COMPREPLY=($(compgen -W "$levels" -- "$cur"))
			return ;;
		--mode)
			COMPREPLY=($(compgen -W "$modes" -- "$cur"))
			return ;;
		--backtrace)
			COMPREPLY=($(compgen -W "show hide only" -- "$cur"))
			return ;;
		-S | --since | -U | --until)
			COMPREPLY=($(compgen -W "today yesterday now -1h -10min
				'-1d'" -- "$cur"))
			return ;;
		--shard)
			_logengine_shards "$cur"
			return ;;
		--cursor-file)
			_logengine_files "$cur"
			return ;;
		-D | --directory)
			_logengine_dirs "$cur"
			return ;;
		-n | --lines | -g | --grep | --after-cursor | --reorder-window | \
		-t | --identifier | -u | --unit | --output-fields)
			return ;;
		esac
		case $cur in
		--output=* | --priority=* | --mode=* | --backtrace=*)
			local opt=${cur%%=*} list
			case $opt in
			--output) list=$formats ;;
			--priority) list=$levels ;;
			--mode) list=$modes ;;
			--backtrace) list="show hide only" ;;
			esac
			COMPREPLY=($(compgen -P "$opt=" -W "$list" -- "${cur#*=}"))
			return ;;
		LEVEL=*)
			COMPREPLY=($(compgen -P "LEVEL=" -W "TRACE DEBUG INFO WARN
				ERROR FATAL" -- "${cur#LEVEL=}"))
			return ;;
		-*)
			COMPREPLY=($(compgen -W "-n --lines -r --reverse -f --follow
				--no-follow -S --since -U --until -p --priority -g --grep
				-i --ignore-case --case-sensitive -o --output --utc
				--no-pager -q --quiet --shard --show-cursor --after-cursor
				--cursor-file --mode --reorder-window --backtrace -D
				--directory -e --pager-end -t --identifier -u --unit
				--output-fields --no-color -a --all -l --full --no-full -x
				--catalog --no-hostname -h --help" -- "$cur"))
			return ;;
		[A-Z]*)
			COMPREPLY=($(compgen -W "SHARD= SEQ= LEVEL= PRIORITY=
				MESSAGE= FLAGS=" -- "$cur"))
			compopt -o nospace 2>/dev/null
			return ;;
		esac
		_logengine_dirs "$cur"
		;;
	stats)
		case $prev in
		--mode)
			COMPREPLY=($(compgen -W "$modes" -- "$cur"))
			return ;;
		-i | --interval | -n | --count) return ;;
		esac
		local o="--mode --disk-usage --live -h --help"
		[[ " ${COMP_WORDS[*]} " == *" --live "* ]] &&
			o="--live -i --interval -n --count"
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "$o" -- "$cur"))
		else
			_logengine_dirs "$cur"
		fi
		;;
	forward | collect | serve)
		_logengine_shipping "$cmd" "$prev" "$cur"
		;;
	vacuum)
		case $prev in
		--size | --time) return ;;
		esac
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "--size --time --force --dry-run -h
				--help" -- "$cur"))
		else
			_logengine_dirs "$cur"
		fi
		;;
	recover | verify)
		if [[ $cur == -* ]]; then
			local o="-h --help"
			[[ $cmd == recover ]] && o="--init $o"
			COMPREPLY=($(compgen -W "$o" -- "$cur"))
		else
			_logengine_dirs "$cur"
		fi
		;;
	capture)
		local i
		for ((i = 2; i < COMP_CWORD; i++)); do
			if [[ ${COMP_WORDS[i]} == -- ]]; then
				# the command and its arguments
				COMPREPLY=($(compgen -c -- "$cur"))
				return
			fi
		done
		case $prev in
		-d | --dir)
			_logengine_dirs "$cur"
			return ;;
		-f | --format)
			COMPREPLY=($(compgen -W "raw text json" -- "$cur"))
			return ;;
		esac
		COMPREPLY=($(compgen -W "--dir --passthrough --format --verbose
			--help --" -- "$cur"))
		;;
	esac
}

complete -F _logengine logengine
